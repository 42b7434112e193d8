// pe_ternary: the pe with 2-bit ternary weights (2'b01 = +1, 2'b11 = -1, 2'b00 / 2'b10 = 0).
// No multiplier: the psum register takes psum_in + x, psum_in - x or psum_in. Sums wrap modulo 2^32.
`default_nettype none

module pe_ternary (
    input  wire        clk,
    input  wire        w_we,      // write w_in into bank w_bank at this edge
    input  wire        w_bank,    // bank written by w_we
    input  wire [1:0]  w_in,      // ternary weight code
    input  wire [7:0]  x_in,      // signed activation from the west
    input  wire        b_in,      // bank the activation x_in is weighted with
    input  wire [31:0] psum_in,   // partial sum from the north (0 in the top row)
    output reg  [7:0]  x_out,     // activation register, to the east
    output reg         b_out,     // its bank, to the east
    output reg  [31:0] psum_out   // partial sum register, to the south
);
    reg  [1:0] bank0, bank1;
    wire [1:0] w = b_out ? bank1 : bank0;
    wire       nonzero  = w[0];
    wire       negative = w[0] & w[1];

    // One adder: -x = ~x + 1, so subtracting is adding the inverted x with a carry-in of 1.
    // Example: psum 10, x 3, w = -1: 10 + ~3 + 1 = 10 + (2^32 - 4) + 1 = 7 (mod 2^32).
    wire [31:0] x_wide = {{24{x_out[7]}}, x_out} & {32{nonzero}};
    wire [31:0] addend = x_wide ^ {32{negative}};

    always @(posedge clk) begin
        if (w_we && !w_bank) bank0 <= w_in;
        if (w_we &&  w_bank) bank1 <= w_in;
        x_out    <= x_in;
        b_out    <= b_in;
        psum_out <= psum_in + addend + {31'd0, negative};
    end
endmodule

`default_nettype wire

// pe: one int8 weight-stationary processing element.
// Two weight registers (banks) hold W[r][c] of two tiles; the activation register passes x east,
// the psum register passes psum_in + x * W[bank] south. Sums wrap modulo 2^32.
`default_nettype none

module pe (
    input  wire        clk,
    input  wire        w_we,      // write w_in into bank w_bank at this edge
    input  wire        w_bank,    // bank written by w_we
    input  wire [7:0]  w_in,      // signed weight
    input  wire [7:0]  x_in,      // signed activation from the west
    input  wire        b_in,      // bank the activation x_in multiplies with
    input  wire [31:0] psum_in,   // partial sum from the north (0 in the top row)
    output reg  [7:0]  x_out,     // activation register, to the east
    output reg         b_out,     // its bank, to the east
    output reg  [31:0] psum_out   // partial sum register, to the south
);
    reg  [7:0] bank0, bank1;
    wire [7:0] w = b_out ? bank1 : bank0;

    // 8 x 8 signed -> 16 bits, sign-extended to 32: -128 * -128 = 16384 fits
    wire signed [15:0] product = $signed(x_out) * $signed(w);

    always @(posedge clk) begin
        if (w_we && !w_bank) bank0 <= w_in;
        if (w_we &&  w_bank) bank1 <= w_in;
        x_out    <= x_in;
        b_out    <= b_in;
        psum_out <= psum_in + {{16{product[15]}}, product};
    end
endmodule

`default_nettype wire

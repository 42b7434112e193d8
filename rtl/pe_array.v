// pe_array: the ROWS x COLS grid of PEs (pe, or pe_ternary when TERNARY = 1), nothing else.
// WS: weights stay in the PEs, activations flow east, partial sums flow south.
// Inputs arrive already skewed (systolic_core does that): row r's activation r cycles late,
// column c's weight write c cycles late. psum_out is the bottom row, column c one cycle after c - 1.
`default_nettype none

module pe_array #(
    parameter ROWS     = 8,                           // PE rows (reduction extent k of a tile)
    parameter COLS     = 8,                           // PE columns (output extent n of a tile)
    parameter TERNARY  = 0,                           // 1: pe_ternary (2-bit weights), 0: pe (int8)
    parameter W_BITS   = TERNARY ? 2 : 8,             // derived, leave as is: bits per weight
    parameter ROW_BITS = ROWS > 1 ? $clog2(ROWS) : 1  // derived, leave as is: bits of a row index
) (
    input  wire                     clk,
    input  wire [COLS-1:0]          w_we,     // column c: write a weight this edge
    input  wire [COLS-1:0]          w_bank,   // column c: into this bank
    input  wire [COLS*ROW_BITS-1:0] w_row,    // column c: of this PE row
    input  wire [COLS*W_BITS-1:0]   w_data,   // column c: the weight
    input  wire [ROWS*8-1:0]        x_in,     // row r: activation entering PE(r, 0)
    input  wire [ROWS-1:0]          b_in,     // row r: the bank that activation uses
    output wire [COLS*32-1:0]       psum_out  // column c: the bottom PE's partial sum register
);
    // PE(r, c) drives slot r*COLS + c of these; its west / north neighbour is the slot before.
    // Arrays of nets, not one wide vector: a simulator then wakes only a PE's neighbours when it changes
    // (Icarus re-evaluates every part-select of a vector on any change: 100x slower on an 8x8 array).
    wire [7:0]  x_east     [0:ROWS*COLS-1];
    wire        b_east     [0:ROWS*COLS-1];
    wire [31:0] psum_south [0:ROWS*COLS-1];

    genvar r, c;
    generate
        for (r = 0; r < ROWS; r = r + 1) begin : g_row
            for (c = 0; c < COLS; c = c + 1) begin : g_col
                localparam integer ROW = r;
                localparam HERE = r * COLS + c;

                wire        we = w_we[c] && w_row[c*ROW_BITS +: ROW_BITS] == ROW[ROW_BITS-1:0];
                wire [7:0]  x_w;  // from the west
                wire        b_w;
                wire [31:0] p_n;  // from the north

                if (c == 0) begin : g_west_edge
                    assign x_w = x_in[r*8 +: 8];
                    assign b_w = b_in[r];
                end else begin : g_west
                    assign x_w = x_east[HERE-1];
                    assign b_w = b_east[HERE-1];
                end
                if (r == 0) begin : g_top_edge
                    assign p_n = 32'd0;
                end else begin : g_north
                    assign p_n = psum_south[HERE-COLS];
                end

                if (TERNARY) begin : g_pe
                    pe_ternary u_pe (
                        .clk(clk), .w_we(we), .w_bank(w_bank[c]), .w_in(w_data[c*W_BITS +: W_BITS]),
                        .x_in(x_w), .b_in(b_w), .psum_in(p_n),
                        .x_out(x_east[HERE]), .b_out(b_east[HERE]),
                        .psum_out(psum_south[HERE]));
                end else begin : g_pe
                    pe u_pe (
                        .clk(clk), .w_we(we), .w_bank(w_bank[c]), .w_in(w_data[c*W_BITS +: W_BITS]),
                        .x_in(x_w), .b_in(b_w), .psum_in(p_n),
                        .x_out(x_east[HERE]), .b_out(b_east[HERE]),
                        .psum_out(psum_south[HERE]));
                end

                if (c == COLS - 1) begin : g_edge
                    wire unused_east = ^{x_east[HERE], b_east[HERE]};  // nothing east of the array
                end
                if (r == ROWS - 1) begin : g_bottom
                    assign psum_out[c*32 +: 32] = psum_south[HERE];
                end
            end
        end
    endgenerate
endmodule

`default_nettype wire

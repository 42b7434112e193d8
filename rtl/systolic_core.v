// systolic_core: a weight-stationary ROWS x COLS systolic array with double-buffered weights,
// input skew, output de-skew and an output accumulator. Interface and cycle timing: docs/rtl.md.
// An activation row accepted in cycle n gives its output row in cycle n + ROWS + COLS + 1.
`default_nettype none

module systolic_core #(
    parameter ROWS      = 8,   // PE rows = the reduction (k) extent of one weight tile
    parameter COLS      = 8,   // PE columns = the output (n) extent of one weight tile
    parameter TERNARY   = 0,   // 0: signed 8-bit weights (MAC); 1: 2-bit ternary weights (add/sub/skip)
    parameter ACC_DEPTH = 512  // accumulator rows (COLS x 32 bits each); a tile streams at most this many
) (
    input  wire                             clk,
    input  wire                             rst,      // synchronous, active high
    input  wire                             w_valid,  // a weight row is offered
    output wire                             w_ready,  // the bank being loaded is FREE
    input  wire [COLS*(TERNARY ? 2 : 8)-1:0] w_data,  // [c*W_BITS +: W_BITS] = W[r][c]
    input  wire                             x_valid,  // an activation row is offered
    output wire                             x_ready,  // the bank of the streaming tile is FULL
    input  wire [ROWS*8-1:0]                x_data,   // [r*8 +: 8] = X[t][r]
    input  wire                             x_last,   // last activation row of the tile
    input  wire                             x_acc,    // 1: add to accumulator row t; 0: overwrite it
    output reg                              y_valid,
    output reg  [COLS*32-1:0]               y_data,   // [c*32 +: 32] = accumulator row t, column c
    output reg                              y_last
);
    localparam W_BITS   = TERNARY ? 2 : 8;
    localparam ROW_BITS = ROWS > 1 ? $clog2(ROWS) : 1;            // weight row counter
    localparam T_BITS   = ACC_DEPTH > 1 ? $clog2(ACC_DEPTH) : 1;  // activation row counter t
    localparam integer LAST_W_ROW = ROWS - 1;

    // ---- Handshake and bank state. A bank is FULL from the cycle after its last weight row is
    // accepted until the cycle after its tile's x_last row is accepted; then FREE again.
    reg [1:0]          full;        // full[b]: bank b is FULL
    reg                load_ptr;    // bank the weight rows go to
    reg                stream_ptr;  // bank the activation rows use
    reg [ROW_BITS-1:0] w_row;       // r of the next weight row
    reg [T_BITS-1:0]   x_row;       // t of the next activation row

    assign w_ready = !full[load_ptr];
    assign x_ready =  full[stream_ptr];

    wire w_take = w_valid && w_ready;
    wire x_take = x_valid && x_ready;
    wire w_done = w_take && w_row == LAST_W_ROW[ROW_BITS-1:0];  // the tile's last weight row
    wire x_done = x_take && x_last;               // the tile's last activation row

    always @(posedge clk) begin
        if (rst) begin
            full       <= 2'b00;
            load_ptr   <= 1'b0;
            stream_ptr <= 1'b0;
            w_row      <= {ROW_BITS{1'b0}};
            x_row      <= {T_BITS{1'b0}};
        end else begin
            if (w_take) w_row <= w_done ? {ROW_BITS{1'b0}} : w_row + 1'b1;
            if (x_take) x_row <= x_last ? {T_BITS{1'b0}} : x_row + 1'b1;
            if (w_done) load_ptr   <= !load_ptr;
            if (x_done) stream_ptr <= !stream_ptr;
            // Never the same bank: w_done needs its bank FREE, x_done needs its bank FULL.
            if (w_done) full[load_ptr]   <= 1'b1;
            if (x_done) full[stream_ptr] <= 1'b0;
        end
    end

    // ---- Weight column skew: a row accepted in cycle n is written into column c at the edge that
    // ends cycle n + c, just after the previous user of that bank has left column c.
    wire [COLS-1:0]          wc_we, wc_bank;
    wire [COLS*ROW_BITS-1:0] wc_row;
    wire [COLS*W_BITS-1:0]   wc_data;

    // ---- Activation row skew: row r enters PE(r, 0) r cycles late, with the bank it uses.
    wire [ROWS*8-1:0] xs_data;
    wire [ROWS-1:0]   xs_bank;

    genvar r, c;
    generate
        for (c = 0; c < COLS; c = c + 1) begin : g_wskew
            if (c == 0) begin : g_first
                assign wc_we[0]              = w_take;
                assign wc_bank[0]            = load_ptr;
                assign wc_row[0 +: ROW_BITS] = w_row;
            end else begin : g_next  // the write control walks east one column per cycle
                delay_line #(.WIDTH(2 + ROW_BITS), .DEPTH(1)) u_ctl (
                    .clk(clk), .rst(rst),
                    .d({wc_we[c-1], wc_bank[c-1], wc_row[(c-1)*ROW_BITS +: ROW_BITS]}),
                    .q({wc_we[c],   wc_bank[c],   wc_row[c*ROW_BITS +: ROW_BITS]}));
            end
            delay_line #(.WIDTH(W_BITS), .DEPTH(c)) u_data (
                .clk(clk), .rst(rst),
                .d(w_data[c*W_BITS +: W_BITS]), .q(wc_data[c*W_BITS +: W_BITS]));
        end

        for (r = 0; r < ROWS; r = r + 1) begin : g_xskew
            delay_line #(.WIDTH(9), .DEPTH(r)) u_skew (
                .clk(clk), .rst(rst),
                .d({stream_ptr, x_data[r*8 +: 8]}), .q({xs_bank[r], xs_data[r*8 +: 8]}));
        end
    endgenerate

    // ---- The PE grid: X[t][r] is in PE(r, c) during cycle n + 1 + r + c; the bottom row's sum
    // for column c is in its psum register during cycle n + 1 + ROWS + c.
    wire [COLS*32-1:0] bottom;

    pe_array #(.ROWS(ROWS), .COLS(COLS), .TERNARY(TERNARY)) u_array (
        .clk(clk), .w_we(wc_we), .w_bank(wc_bank), .w_row(wc_row), .w_data(wc_data),
        .x_in(xs_data), .b_in(xs_bank), .psum_out(bottom));

    // ---- De-skew: column c waits COLS - 1 - c cycles, so the whole row is aligned during
    // cycle n + ROWS + COLS. Its tag {valid, t, x_acc, x_last} waits ROWS + COLS cycles.
    wire [COLS*32-1:0] aligned;
    wire               tag_valid, tag_acc, tag_last;
    wire [T_BITS-1:0]  tag_row;

    generate
        for (c = 0; c < COLS; c = c + 1) begin : g_deskew
            delay_line #(.WIDTH(32), .DEPTH(COLS - 1 - c)) u_deskew (
                .clk(clk), .rst(rst), .d(bottom[c*32 +: 32]), .q(aligned[c*32 +: 32]));
        end
    endgenerate

    delay_line #(.WIDTH(T_BITS + 3), .DEPTH(ROWS + COLS)) u_tag (
        .clk(clk), .rst(rst),
        .d({x_take, x_row, x_acc, x_last}), .q({tag_valid, tag_row, tag_acc, tag_last}));

    // ---- Accumulator: y[t] = (x_acc ? acc[t] : 0) + sums, stored and registered onto y_data,
    // so y_valid is high during cycle n + ROWS + COLS + 1.
    reg  [COLS*32-1:0] acc [0:ACC_DEPTH-1];
    wire [COLS*32-1:0] acc_row = acc[tag_row];
    wire [COLS*32-1:0] y_next;

    generate
        for (c = 0; c < COLS; c = c + 1) begin : g_acc
            assign y_next[c*32 +: 32] = (tag_acc ? acc_row[c*32 +: 32] : 32'd0) + aligned[c*32 +: 32];
        end
    endgenerate

    always @(posedge clk) begin
        if (tag_valid) acc[tag_row] <= y_next;
    end

    always @(posedge clk) begin
        if (tag_valid) y_data <= y_next;
        if (rst) begin
            y_valid <= 1'b0;
            y_last  <= 1'b0;
        end else begin
            y_valid <= tag_valid;
            y_last  <= tag_valid && tag_last;
        end
    end
endmodule

`default_nettype wire

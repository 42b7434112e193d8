// delay_line: a WIDTH-bit shift register of DEPTH stages, cleared by rst; q is d delayed by DEPTH cycles.
// DEPTH = 0 is a plain wire. The systolic core uses it for skew, de-skew and the row-tag pipeline.
`default_nettype none

module delay_line #(
    parameter WIDTH = 1,  // bits carried per stage
    parameter DEPTH = 1   // cycles of delay (stages); 0 = a wire
) (
    input  wire             clk,
    input  wire             rst,  // synchronous, active high: all stages read 0 afterwards
    input  wire [WIDTH-1:0] d,
    output wire [WIDTH-1:0] q
);
    // tap[i] is d delayed by i cycles (an array of nets, so a stage wakes only the next one)
    wire [WIDTH-1:0] tap [0:DEPTH];
    assign tap[0] = d;
    assign q = tap[DEPTH];

    genvar i;
    generate
        if (DEPTH == 0) begin : g_wire
            wire unused_clock = clk ^ rst;  // a wire needs no clock
        end
        for (i = 0; i < DEPTH; i = i + 1) begin : g_stage
            reg [WIDTH-1:0] stage;
            always @(posedge clk) begin
                if (rst) stage <= {WIDTH{1'b0}};
                else     stage <= tap[i];
            end
            assign tap[i+1] = stage;
        end
    endgenerate
endmodule

`default_nettype wire

"""The RTL compiled by Verilator with a free-running Verilog testbench: no Python in the loop.

Used by benchmarks/cycle_speed.py to show what cocotb costs. The testbench streams the same Stimulus (a `gemm`
one: every row offered as soon as the previous one is accepted, no waits) from $readmemh files and finishes when
the last output row appears, printing the cycle of that row and a checksum of all outputs, which the caller
compares with the cycle-level model.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from accelsim.rtl import runner

TESTBENCH = """`timescale 1ns/1ps
module tb;
    reg clk = 0;
    always #5 clk = ~clk;
    reg rst = 1;
    reg [{wbits}-1:0] wmem [0:{nw}-1];
    reg [{xbits}+1:0] xmem [0:{nx}-1];     // {{x_acc, x_last, x_data}}
    integer wi = 0, xi = 0, yi = 0, cycle = 0;
    reg [31:0] checksum = 0;
    wire w_ready, x_ready, y_valid, y_last;
    wire [{ybits}-1:0] y_data;
    wire w_valid = !rst && wi < {nw};
    wire x_valid = !rst && xi < {nx};
    wire [{xbits}+1:0] xrow = xmem[xi < {nx} ? xi : 0];
    systolic_core #(.ROWS({rows}), .COLS({cols}), .TERNARY(0), .ACC_DEPTH(512)) dut (
        .clk(clk), .rst(rst), .w_valid(w_valid), .w_ready(w_ready), .w_data(wmem[wi < {nw} ? wi : 0]),
        .x_valid(x_valid), .x_ready(x_ready), .x_data(xrow[{xbits}-1:0]), .x_last(xrow[{xbits}]),
        .x_acc(xrow[{xbits}+1]), .y_valid(y_valid), .y_data(y_data), .y_last(y_last));
    integer c;
    always @(posedge clk) if (!rst) begin
        if (w_valid && w_ready) wi <= wi + 1;
        if (x_valid && x_ready) xi <= xi + 1;
        if (y_valid) begin
            for (c = 0; c < {cols}; c = c + 1) checksum = checksum * 31 + y_data[c*32 +: 32];
            yi <= yi + 1;
            if (yi == {nx} - 1) begin
                $display("last %0d checksum %0d", cycle, checksum);
                $finish;
            end
        end
        cycle <= cycle + 1;
    end
    initial begin
        $readmemh("w.hex", wmem);
        $readmemh("x.hex", xmem);
        repeat (3) @(posedge clk);
        #1 rst = 0;
    end
endmodule
"""


def build(stim, folder: Path) -> Path:
    """Write the testbench and its memory files into `folder` and compile it; returns the binary."""
    folder.mkdir(parents=True, exist_ok=True)
    wbits, xbits = stim.cols * 8, stim.rows * 8
    (folder / "w.hex").write_text("\n".join(f"{w:x}" for w in stim.w_words()) + "\n")
    xs = [(int(a) << (xbits + 1)) | (int(last) << xbits) | word
          for word, last, a in zip(stim.x_words(), stim.x_last, stim.x_acc)]
    (folder / "x.hex").write_text("\n".join(f"{x:x}" for x in xs) + "\n")
    (folder / "tb.v").write_text(TESTBENCH.format(wbits=wbits, xbits=xbits, ybits=stim.cols * 32, nw=len(stim.w_rows),
                                                  nx=len(stim.x_rows), rows=stim.rows, cols=stim.cols))
    runner._runner("verilator")       # PATH, VERILATOR_ROOT, MAKEFLAGS as the cocotb builds use them
    subprocess.run(["verilator", "--binary", "--timing", "-O3", "-CFLAGS", "-std=c++20 -fcoroutines -O2",
                    "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "tb", "-Mdir", str(folder / "obj"),
                    str(folder / "tb.v"), *map(str, runner.sources())], check=True, capture_output=True)
    return folder / "obj" / "Vtb"


def run(binary: Path) -> tuple[int, int]:
    """(cycle of the last output row counted from reset's release, checksum)."""
    out = subprocess.run([str(binary)], cwd=binary.parent.parent, check=True, capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("last "))
    _, last, _, checksum = line.split()
    return int(last), int(checksum)


def workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="accelsim-verilator-raw-", dir=os.environ.get("TMPDIR")))

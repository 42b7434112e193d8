"""The systolic film as one self-contained HTML page: the frames as inline JSON, drawn as SVG by a small script,
with play / pause / step controls. Works offline: no fetches, no fonts, no libraries.

Invariant: the page's data is the Film's (film_data); the script only lays it out. `svgFrame(data, i)` is a pure
function of the data, so a test can run it under node and read the numbers it draws.
"""
from __future__ import annotations

import html
import json

from accelsim.arch import Dataflow
from accelsim.explain.render_text import describe
from accelsim.explain.film import Film
from compiler import output


def film_data(film: Film) -> dict:
    """The Film as plain JSON: cells as [w, w_label, w_new, spare, spare_label, x, x_label, psum, psum_label]."""
    return {
        "dataflow": film.dataflow.value, "rows": film.rows, "cols": film.cols, "m": film.m, "k": film.k,
        "n": film.n, "a": film.a.tolist(), "b": film.b.tolist(), "stationary": film.stationary,
        "streamed": film.streamed, "cycles": film.cycles, "closed_form": film.closed_form,
        "marks": list(film.marks), "ports": list(film.port_names),
        "last_output_cycle": film.last_output_cycle,
        "frames": [{
            "cycle": f.cycle, "w_in": f.w_in, "x_in": f.x_in, "y_out": f.y_out,
            "cells": [[[c.w, c.w_label, c.w_new, c.spare, c.spare_label, c.x, c.x_label, c.psum, c.psum_label]
                       for c in row] for row in f.cells],
            "out": [list(row) for row in f.out], "final": [list(row) for row in f.out_final],
            "new": [list(ij) for ij in f.out_new]} for f in film.frames],
    }


def write_html(film: Film, path) -> None:
    title = (f"{film.dataflow.value.upper()} systolic array {film.rows} x {film.cols}: "
             f"C[{film.m}x{film.n}] = A[{film.m}x{film.k}] @ B[{film.k}x{film.n}]")
    data = json.dumps(film_data(film), separators=(",", ":")).replace("</", "<\\/")
    legend = LEGEND_OS if film.dataflow is Dataflow.OS else LEGEND
    page = PAGE.replace("__TITLE__", html.escape(title)).replace("__SUMMARY__", html.escape(describe(film))) \
        .replace("__LEGEND__", legend).replace("__DATA__", data).replace("__SCRIPT__", SCRIPT)
    output.write_file(path, page)


LEGEND = """<b style="color:#1f5fa8">S</b> the stationary operand (grey, in brackets: the other bank of its \
double buffer),
<b style="color:#c0600a">&rarr;</b> the value passing east through the PE,
<b style="color:#2a7a2a">&Sigma;</b> the partial sum it registered (flowing south). Yellow: written this cycle.
C fills in as the model's output rows appear (grey: partial, over the k folds so far)."""
LEGEND_OS = """<b style="color:#1f5fa8">&darr;</b> the value of B passing south through the PE,
<b style="color:#c0600a">&rarr;</b> the value of A passing east,
<b style="color:#2a7a2a">&Sigma;</b> the sum accumulating in place, with the k range it covers so far,
<b style="color:#888">&Sigma;'</b> the other accumulator bank: the fold before, its finished sums draining south, a row
per cycle. C fills in as the drained rows appear (each fold's bottom row first)."""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
pre { background: #f4f4f4; padding: .6em; white-space: pre-wrap; }
#controls button { font-size: 1.1em; min-width: 2.5em; }
#controls input[type=range] { width: 24em; vertical-align: middle; }
#stage svg text { font-family: monospace; white-space: pre; }
</style></head>
<body>
<h1>__TITLE__</h1>
<pre id="summary">__SUMMARY__</pre>
<div id="controls">
<button id="first" title="first cycle">first</button>
<button id="back" title="one cycle back (left arrow)">&#x25C0; back</button>
<button id="play" title="play / pause (space)">play</button>
<button id="step" title="one cycle on (right arrow)">step &#x25B6;</button>
<button id="last" title="last cycle">last</button>
<input id="scrub" type="range" min="0" value="0">
<label>speed <select id="speed"><option value="1000">1</option><option value="500" selected>2</option>
<option value="250">4</option><option value="100">10</option></select> cycles/s</label>
</div>
<div id="stage"></div>
<p>Each box is one PE during one cycle, read from the cycle-level model's registers: __LEGEND__</p>
<script id="film" type="application/json">__DATA__</script>
<script>
__SCRIPT__
</script>
</body></html>
"""

SCRIPT = r"""
"use strict";
const CW = 180, CH = 66, GAP = 6, MW = 44, MH = 22;
function esc(s) { return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;"); }
function txt(x, y, s, color, size, weight) {
  return `<text x="${x}" y="${y}" fill="${color}" font-size="${size || 13}"` +
    (weight ? ` font-weight="${weight}"` : "") + `>${esc(s)}</text>`;
}
function line(mark, value, label) {
  return value === null ? `${mark}    .` : `${mark} ${String(value).padStart(4)} ${label}`;
}
function svgFrame(data, i) {
  const f = data.frames[i], gx = 40, gy = 70, n = data.marks.length, ch = CH + 20 * (n - 3);   // OS: 4 lines
  const gridW = data.cols * (CW + GAP), gridH = data.rows * (ch + GAP);
  const cx = gx + gridW + 40, cy = gy;
  const ay = cy + (data.m + 1.5) * MH, by = ay + (data.m + 1.5) * MH;   // A and B, for checking by hand
  const width = cx + Math.max(data.n, data.k) * MW + 40, height = Math.max(gy + gridH, by + (data.k + 1) * MH) + 30;
  const out = [`<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`];
  out.push(txt(10, 24, `cycle ${f.cycle} of ${data.cycles - 1}`, "#000", 20, "bold"));
  const ports = [[data.ports[0], f.w_in], [data.ports[1], f.x_in], ["out", f.y_out]]
    .filter(p => p[1]).map(p => p[0] + ": " + p[1]).join("   ");
  out.push(txt(10, 48, ports, "#444", 13));
  for (let c = 0; c < data.cols; c++) out.push(txt(gx + c * (CW + GAP) + 4, gy - 6, `col ${c}`, "#888", 11));
  for (let r = 0; r < data.rows; r++) {
    out.push(txt(4, gy + r * (ch + GAP) + 38, `row ${r}`, "#888", 11));
    for (let c = 0; c < data.cols; c++) {
      const [w, wl, wnew, spare, sl, x, xl, s, sLabel] = f.cells[r][c];
      const x0 = gx + c * (CW + GAP), y0 = gy + r * (ch + GAP);
      const fill = x !== null ? "#fff3e6" : (s !== null ? "#eef7ee" : "#fafafa");
      out.push(`<rect x="${x0}" y="${y0}" width="${CW}" height="${ch}" rx="5" fill="${fill}" stroke="#999"/>`);
      if (wnew) out.push(`<rect x="${x0 + 2}" y="${y0 + 3}" width="${CW - 4}" height="17" fill="#fff59d"/>`);
      out.push(txt(x0 + 5, y0 + 16, line(data.marks[0], w, wl), "#1f5fa8", 12, "bold"));
      if (n === 3 && spare !== null) out.push(txt(x0 + CW - 34, y0 + 16, `(${spare})`, "#999", 11));
      out.push(txt(x0 + 5, y0 + 36, line(data.marks[1], x, xl), "#c0600a", 12));
      out.push(txt(x0 + 5, y0 + 56, line(data.marks[2], s, sLabel), "#2a7a2a", 12));
      if (n === 4) out.push(txt(x0 + 5, y0 + 76, line(data.marks[3], spare, sl), "#888", 12));
    }
  }
  out.push(txt(cx, cy - 6, "C = A @ B", "#000", 13, "bold"));
  const isNew = new Set(f.new.map(p => p[0] + "," + p[1]));
  for (let i = 0; i < data.m; i++) {
    for (let j = 0; j < data.n; j++) {
      const v = f.out[i][j], x0 = cx + j * MW, y0 = cy + i * MH;
      const fill = isNew.has(i + "," + j) ? "#fff59d" : "#fff";
      out.push(`<rect x="${x0}" y="${y0}" width="${MW}" height="${MH}" fill="${fill}" stroke="#ccc"/>`);
      if (v !== null) out.push(txt(x0 + 4, y0 + 16, v, f.final[i][j] ? "#000" : "#999", 12,
                                   f.final[i][j] ? "bold" : null));
    }
  }
  for (const [name, mat, y] of [["A", data.a, ay], ["B", data.b, by]]) {
    out.push(txt(cx, y - 6, name, "#000", 13, "bold"));
    mat.forEach((row, i) => row.forEach((v, j) => {
      out.push(`<rect x="${cx + j * MW}" y="${y + i * MH}" width="${MW}" height="${MH}" fill="#fff" stroke="#eee"/>`);
      out.push(txt(cx + j * MW + 4, y + i * MH + 16, v, "#555", 12));
    }));
  }
  out.push("</svg>");
  return out.join("\n");
}
if (typeof document !== "undefined") {
  const data = JSON.parse(document.getElementById("film").textContent);
  const stage = document.getElementById("stage"), scrub = document.getElementById("scrub");
  const play = document.getElementById("play"), speed = document.getElementById("speed");
  let i = 0, timer = null;
  scrub.max = data.frames.length - 1;
  function show(j) { i = Math.max(0, Math.min(data.frames.length - 1, j)); scrub.value = i;
                     stage.innerHTML = svgFrame(data, i); }
  function pause() { if (timer) clearInterval(timer); timer = null; play.textContent = "play"; }
  function start() {
    if (i >= data.frames.length - 1) show(0);
    play.textContent = "pause";
    timer = setInterval(() => { if (i >= data.frames.length - 1) pause(); else show(i + 1); }, +speed.value);
  }
  play.onclick = () => timer ? pause() : start();
  document.getElementById("step").onclick = () => { pause(); show(i + 1); };
  document.getElementById("back").onclick = () => { pause(); show(i - 1); };
  document.getElementById("first").onclick = () => { pause(); show(0); };
  document.getElementById("last").onclick = () => { pause(); show(data.frames.length - 1); };
  scrub.oninput = () => { pause(); show(+scrub.value); };
  speed.onchange = () => { if (timer) { pause(); start(); } };
  document.addEventListener("keydown", e => {
    if (e.key === " ") { e.preventDefault(); play.onclick(); }
    if (e.key === "ArrowRight") { pause(); show(i + 1); }
    if (e.key === "ArrowLeft") { pause(); show(i - 1); }
  });
  const asked = /cycle=(\d+)/.exec(location.hash);   // page.html#cycle=12 opens on cycle 12
  show(asked ? +asked[1] : 0);
}
if (typeof module !== "undefined") module.exports = { svgFrame };
"""

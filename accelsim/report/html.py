"""One self-contained HTML page: inline CSS, a few lines of inline JS (click a header to sort a table),
figures as base64 PNG. Nothing is fetched, so a report opens offline, from a mail, years later.

Invariant: every string that comes from a model, an arch or a sweep is escaped here, once (`cell`, `text`);
callers hand in plain text, never markup, except through the builders below.
"""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass

from accelsim.report.figures import Figure

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 1em 2em 4em; color: #1d2330; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em;
     border-bottom: 1px solid #d8dce3; padding-bottom: 0.2em; } h3 { font-size: 1.05em; }
.subtitle { color: #5b6474; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 0.6em; margin: 1em 0; }
.card { border: 1px solid #d8dce3; border-radius: 6px; padding: 0.5em 0.9em; min-width: 9em; }
.card .k { color: #5b6474; font-size: 0.8em; } .card .v { font-size: 1.25em; font-weight: 600; }
.scroll { overflow-x: auto; max-height: 36em; overflow-y: auto; border: 1px solid #d8dce3; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 12.5px; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eef0f3; white-space: nowrap; }
td.num { text-align: right; } th { background: #f3f5f8; position: sticky; top: 0; text-align: left; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; font-size: 0.75em; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; font-size: 0.75em; }
tfoot td { font-weight: 600; border-top: 2px solid #c9ced8; background: #fafbfc; }
tr.front td { background: #fff3e0; }
.figs { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 0 1.5em;
        align-items: start; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eef0f3; }
figcaption { color: #5b6474; font-size: 0.9em; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; font-size: 12px; margin: 0.3em 0 0.8em; }
details summary { cursor: pointer; } ul.notes { color: #5b6474; }
"""

# Numbers sort by their data-sort value (1.2 ms after 900 us), text by its content; the first click on a
# header sorts ascending, the next descending. Rows in <tfoot> (the totals) never move.
JS = """
(function () {
  function key(cell) {
    var raw = cell.getAttribute("data-sort");
    if (raw !== null && raw !== "" && !isNaN(Number(raw))) { return [0, Number(raw)]; }
    return [1, cell.textContent.trim().toLowerCase()];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) { return a[0] - b[0]; }
    return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
  }
  function sort(table, th, column) {
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r, s) {
      var order = compare(key(r.cells[column]), key(s.cells[column]));
      return ascending ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, column) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sort(table, th, column); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sort(table, th, column); } });
    });
  });
})();
"""


def text(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Cell:
    """A table cell: what is shown, and the number it sorts by (None: sort by the text)."""

    shown: str
    sort: float | None = None


def cell(value: Cell | str | int | float) -> str:
    if not isinstance(value, Cell):
        value = Cell(str(value), value if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
    if value.sort is None:
        return f"<td>{text(value.shown)}</td>"
    return f'<td class="num" data-sort="{float(value.sort)!r}">{text(value.shown)}</td>'


def table(headers: list[str], rows: list[list], footer: list[list] | None = None, table_id: str = "",
          sortable: bool = True, row_classes: list[str] | None = None, scroll: bool = True) -> str:
    """A table; `scroll` boxes it (long tables scroll inside the page, the header row stays in view)."""
    head = "".join(f'<th scope="col">{text(h)}</th>' for h in headers)
    classes = row_classes or [""] * len(rows)
    body = "\n".join(_row(row, css) for row, css in zip(rows, classes))
    foot = "".join(_row(row) for row in footer or [])
    attrs = (f' id="{text(table_id)}"' if table_id else "") + (' class="sortable"' if sortable else "")
    markup = (f"<table{attrs}><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>"
              + (f"<tfoot>{foot}</tfoot>" if foot else "") + "</table>")
    return f'<div class="scroll">{markup}</div>' if scroll else markup


def _row(values: list, css_class: str = "") -> str:
    attr = f' class="{text(css_class)}"' if css_class else ""
    return f"<tr{attr}>" + "".join(cell(v) for v in values) + "</tr>"


def cards(items: list[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="k">{text(k)}</div><div class="v">{text(v)}</div></div>' for k, v in items
    ) + "</div>"


def figure(fig: Figure) -> str:
    data = base64.b64encode(fig.png).decode("ascii")
    return (f'<figure id="fig-{text(fig.name)}"><img alt="{text(fig.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{text(fig.caption)}</figcaption></figure>")


def figures(figs: list[Figure]) -> str:
    return '<div class="figs">' + "\n".join(figure(f) for f in figs) + "</div>"


def nests(texts: dict[str, str]) -> str:
    """Each op's loop nest, folded: `accelsim map`'s teaching view."""
    return "\n".join(f"<details><summary>{text(name)}</summary><pre>{text(body)}</pre></details>"
                     for name, body in texts.items())


def notes(lines: list[str]) -> str:
    return '<ul class="notes">' + "".join(f"<li>{text(line)}</li>" for line in lines) + "</ul>" if lines else ""


def section(title: str, *blocks: str, level: int = 2) -> str:
    return f"<section><h{level}>{text(title)}</h{level}>\n" + "\n".join(b for b in blocks if b) + "</section>"


def page(title: str, subtitle: str, blocks: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{text(title)}</title><style>{CSS}</style></head>\n<body>\n<h1>{text(title)}</h1>"
            f'<p class="subtitle">{text(subtitle)}</p>\n' + "\n".join(blocks)
            + f"\n<script>{JS}</script>\n</body></html>\n")

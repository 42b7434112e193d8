"""Reports people look at: one self-contained HTML page (`--html FILE`) and PNG figures (`--plot DIR`) for a
run, a comparison of archs, and a sweep. Figures are matplotlib (Agg); pages need no network to open.
"""
from accelsim.report.compare import compare_report, compare_text
from accelsim.report.run_page import run_report
from accelsim.report.sweep_page import sweep_report

__all__ = ["run_report", "compare_report", "compare_text", "sweep_report"]

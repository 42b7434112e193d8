"""docs/tutorial.md, training.md, multidevice.md and precision.md are run, so they cannot go stale: every command in
their ```sh blocks exits 0, every line of their ```text blocks is in what that section's commands printed, and every
number the prose quotes in backticks is too.

Sections are the `## ` headings; a section's quotes are checked against its own commands' output only.
Whitespace is compared collapsed (the tables pad columns), nothing else is loosened.
"""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = {name: ROOT / "docs" / name for name in ("tutorial.md", "training.md", "multidevice.md", "precision.md")}
ACCELSIM = Path(sys.executable).with_name("accelsim")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
# inline code that names a command, an option or a file rather than quoting output
NOT_QUOTED = re.compile(r"^(-|\.venv|accelsim\b|make\b)|\.(html|gif|yaml|md|py)\b")


def squash(text: str) -> str:
    return " ".join(text.split())


def sections(doc: Path) -> dict[str, dict]:
    """{heading: {"commands": [...], "excerpts": [...], "quotes": [...]}} for every `## ` section."""
    found = {}
    for chunk in re.split(r"^## ", doc.read_text(), flags=re.M)[1:]:
        heading, _, body = chunk.partition("\n")
        commands, excerpts = [], []
        for kind, block in FENCE.findall(body):
            lines = [line for line in block.splitlines() if line.strip()]
            if kind == "sh":
                commands += lines
            elif kind == "text":
                excerpts += lines
        prose = FENCE.sub("", body)
        quotes = [q for q in SPAN.findall(prose) if re.search(r"\d", q) and not NOT_QUOTED.search(q)]
        found[heading.strip()] = {"commands": commands, "excerpts": excerpts, "quotes": quotes}
    return found


SECTIONS = sections(DOCS["tutorial.md"])
ALL = [(name, heading) for name, doc in DOCS.items() for heading in sections(doc)]


def run(line: str, cwd: Path) -> str:
    argv = shlex.split(line, comments=True)
    assert argv[0] == ".venv/bin/accelsim", f"the tutorial runs accelsim from the venv: {line}"
    proc = subprocess.run([str(ACCELSIM), *argv[1:]], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("tutorial")


def test_the_tutorial_has_the_four_parts_and_quotes_numbers():
    names = " ".join(SECTIONS)
    for topic in ("AlexNet", "ResNet-50", "ternary", "cycle by cycle"):
        assert topic in names, names
    for name, part in SECTIONS.items():
        assert part["commands"] and part["excerpts"] and len(part["quotes"]) >= 5, (name, part)


@pytest.mark.parametrize("doc, heading", ALL)
def test_section_commands_run_and_print_what_the_text_quotes(doc, heading, workdir):
    part = sections(DOCS[doc])[heading]
    output = squash("\n".join(run(line, workdir) for line in part["commands"]))
    for line in part["excerpts"]:
        assert squash(line) in output, f"[{heading}] not printed any more: {line.strip()}"
    for quote in part["quotes"]:
        assert squash(quote) in output, f"[{heading}] the text quotes `{quote}`, the commands do not print it"


def test_the_animations_the_tutorial_writes_exist(workdir):
    """The --out files of section 4 are there and not empty (written by its section's test when this process ran
    it, else by its commands here: a parallel run may have given that section to another worker)."""
    lines = [line for part in SECTIONS.values() for line in part["commands"] if "--out" in line]
    outs = [shlex.split(line)[shlex.split(line).index("--out") + 1] for line in lines]
    assert {Path(o).suffix for o in outs} == {".html", ".gif"}
    for line, out in zip(lines, outs):
        if not (workdir / out).exists():
            run(line, workdir)
        assert (workdir / out).stat().st_size > 1000, out

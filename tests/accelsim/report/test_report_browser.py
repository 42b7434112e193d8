"""The HTML reports (run, compare, sweep) in a real headless Chromium, driven over the DevTools protocol
(--remote-debugging-pipe, stdlib only): each page renders with no console error, no exception and no
network request, its figures decode, its table sorts on a click, and a screenshot is saved.

Chromium is Debian's `chromium` (`make test` installs it); without it these tests skip, except under
CI=true, where a missing browser is a failure.
"""
import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.report import sweep_report

ROOT = Path(__file__).resolve().parents[3]
GDDR5 = str(ROOT / "examples" / "archs" / "tpu_v1_gddr5.yaml")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT_S = 60

if CHROMIUM is None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("chromium is not installed (Debian package `chromium`; `make test` installs it)",
                    pytrace=False)
    pytest.skip("chromium is not installed (Debian package `chromium`)", allow_module_level=True)


class DevTools:
    """A Chromium over --remote-debugging-pipe: commands go to its fd 3, answers and events come from its
    fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, profile: Path):
        to_child, self._to_chrome = os.pipe()
        self._from_chrome, from_child = os.pipe()

        def wire():   # runs in the child before exec: Chromium expects the pipe on fds 3 and 4
            # first out of the way (a pipe end may itself be fd 3 or 4), then onto 3 and 4, inheritable
            ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_child, from_child)]
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
             "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._next_id = 0
        self._answers: dict[int, dict] = {}
        self._inbox: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                self._inbox.put(None)
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for message in messages:
                self._inbox.put(json.loads(message))

    def _pump(self, until) -> None:
        while not until():
            message = self._inbox.get(timeout=TIMEOUT_S)
            if message is None:
                raise RuntimeError("chromium closed the DevTools pipe")
            if "id" in message:
                self._answers[message["id"]] = message
            else:
                self.events.append(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        ident = self._next_id
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        self._pump(lambda: ident in self._answers)
        answer = self._answers.pop(ident)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def wait_event(self, method: str, session: str) -> dict:
        seen = lambda: any(e["method"] == method and e.get("sessionId") == session for e in self.events)  # noqa: E731
        self._pump(seen)
        return next(e for e in self.events if e["method"] == method and e.get("sessionId") == session)

    def open(self, url: str) -> str:
        """A new tab on `url`, loaded, with console, log and network recorded; returns its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 1800, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=session)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self, session: str) -> list[str]:
        """Console errors and warnings, uncaught exceptions, error log entries, and any request that left
        the page (a report must need nothing but itself)."""
        found = []
        for event in (e for e in self.events if e.get("sessionId") == session):
            method, params = event["method"], event["params"]
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {[a.get('value') for a in params['args']]}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(f"log {params['entry']['level']}: {params['entry']['text']}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("file:", "data:", "about:")):
                    found.append(f"network request: {url}")
        return found

    def screenshot(self, session: str, path: Path) -> None:
        """The whole page (up to 12,000 CSS pixels tall), not just the viewport."""
        size = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 12_000), "scale": 1}
        shot = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                         session=session)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, queue.Empty, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chrome = DevTools(tmp_path_factory.mktemp("chromium-profile"))
    yield chrome
    chrome.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The three pages, built as a user builds them: run and compare through the CLI, sweep by the API."""
    out = tmp_path_factory.mktemp("pages")
    small = ["resnet18", "--opt", "image=32"]
    assert main(["run", *small, "--arch", "tpu_v1", "--html", str(out / "run.html"),
                 "--json", str(out / "run.json")]) == 0
    assert main(["compare", *small, "--arch", "tpu_v1", "--arch", GDDR5, "--html", str(out / "compare.html")]) == 0
    assert main(["train", "gpt2", "--arch", "h100", "--batch", "2", "--seq", "32", "--opt", "layers=1", "--opt",
                 "hidden=64", "--opt", "heads=2", "--opt", "vocab=256", "--optimizer", "adamw",
                 "--html", str(out / "train.html"), "--json", str(out / "train.json")]) == 0
    # latency falls with PEs and SRAM, energy rises with both; a non-square array costs more of each, so
    # those points are dominated: a front of some, not all, points
    rows = [{"rows": r, "cols": c, "sram_kib": s, "model": "resnet18", "status": "ok", "reason": "",
             "latency_s": 1e-3 * 4096 / (r * c) * (1 + 64 / s) * (1.3 if r != c else 1.0),
             "energy_j": 1e-4 * (r * c / 4096 + s / 256) * (1.2 if r != c else 1.0)}
            for r in (32, 64, 128) for c in (32, 64, 128) for s in (64, 128, 256)]
    rows.append({"rows": 512, "cols": 512, "sram_kib": 64, "model": "resnet18", "status": "invalid",
                 "reason": "weight tile 256 KiB does not fit the 64 KiB weight buffer", "latency_s": None,
                 "energy_j": None})
    front = [r for r in rows if r["status"] == "ok" and not any(
        o["status"] == "ok" and o["latency_s"] <= r["latency_s"] and o["energy_j"] <= r["energy_j"]
        and (o["latency_s"], o["energy_j"]) != (r["latency_s"], r["energy_j"]) for o in rows)]
    sweep_report(rows, front, ["latency_s", "energy_j"], html=str(out / "sweep.html"))
    return out, json.loads((out / "run.json").read_text()), rows, front


def _column(table: str, header: str) -> str:
    """JS: the data-sort values (else the text) of `header`'s column in table #`table`, top to bottom."""
    return f"""(() => {{
      const t = document.getElementById({json.dumps(table)});
      const i = Array.from(t.tHead.rows[0].cells).findIndex(h => h.textContent.trim() === {json.dumps(header)});
      return Array.from(t.tBodies[0].rows).map(r => r.cells[i].dataset.sort !== undefined
        ? Number(r.cells[i].dataset.sort) : r.cells[i].textContent.trim());
    }})()"""


def _click(table: str, header: str) -> str:
    return f"""(() => {{
      const t = document.getElementById({json.dumps(table)});
      Array.from(t.tHead.rows[0].cells).find(h => h.textContent.trim() === {json.dumps(header)}).click();
      return true;
    }})()"""


IMAGES_OK = """Array.from(document.images).map(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100)"""


def _load(browser, page: Path, shot: Path) -> str:
    session = browser.open(page.as_uri())
    images = browser.evaluate(session, IMAGES_OK)
    assert images and all(images), f"{page.name}: an image did not decode: {images}"
    browser.screenshot(session, shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    return session


def test_run_page_renders_and_sorts(browser, pages, tmp_path):
    out, data, _, _ = pages
    session = _load(browser, out / "run.html", tmp_path / "run.png")
    assert browser.evaluate(session, "document.querySelectorAll('#ops tbody tr').length") == len(data["ops"])
    assert browser.evaluate(session, "document.querySelectorAll('figure img').length") == 4
    times = [op["seconds"] for op in data["ops"]]
    assert browser.evaluate(session, _column("ops", "time")) == pytest.approx(times)   # execution order
    browser.evaluate(session, _click("ops", "time"))
    assert browser.evaluate(session, _column("ops", "time")) == pytest.approx(sorted(times))
    browser.evaluate(session, _click("ops", "time"))
    assert browser.evaluate(session, _column("ops", "time")) == pytest.approx(sorted(times, reverse=True))
    browser.evaluate(session, _click("ops", "layer"))
    names = browser.evaluate(session, _column("ops", "layer"))
    assert names == sorted((op["name"] for op in data["ops"]), key=str.lower)
    assert browser.evaluate(session, "document.querySelector('#ops tfoot td').textContent").startswith("total (")
    assert browser.evaluate(session, "document.querySelectorAll('details pre').length") == len(data["ops"])
    assert browser.problems(session) == []


def test_train_page_renders_and_sorts(browser, pages, tmp_path):
    out = pages[0]
    data = json.loads((out / "train.json").read_text())
    session = _load(browser, out / "train.html", tmp_path / "train.png")
    assert browser.evaluate(session, "document.querySelectorAll('#layers tbody tr').length") == len(data["layers"])
    browser.evaluate(session, _click("layers", "backward"))
    backward = browser.evaluate(session, _column("layers", "backward"))
    assert backward == pytest.approx(sorted(layer["backward_seconds"] for layer in data["layers"]))
    cards = browser.evaluate(session, "Array.from(document.querySelectorAll('.card .k')).map(k => k.textContent)")
    assert {"step", "forward", "backward", "optimizer", "MFU", "peak memory"} <= set(cards)
    assert browser.evaluate(session, "document.querySelectorAll('#memory tbody tr').length") == 5
    assert browser.problems(session) == []


def test_compare_page_renders_and_sorts(browser, pages, tmp_path):
    out, _, _, _ = pages
    session = _load(browser, out / "compare.html", tmp_path / "compare.png")
    assert browser.evaluate(session, "document.querySelectorAll('table.sortable').length") == 2
    header = browser.evaluate(session, "Array.from(document.querySelectorAll('#totals th')).map(h => h.textContent)")
    assert header == ["metric", "tpu_v1", "tpu_v1_gddr5"]
    browser.evaluate(session, _click("ops-1", "wait gddr5"))
    waits = browser.evaluate(session, _column("ops-1", "wait gddr5"))
    assert waits == sorted(waits) and waits[-1] > 0
    assert browser.problems(session) == []


def test_sweep_page_renders_and_sorts(browser, pages, tmp_path):
    out, _, rows, front = pages
    session = _load(browser, out / "sweep.html", tmp_path / "sweep.png")
    assert browser.evaluate(session, "document.querySelectorAll('#points tbody tr').length") == len(rows)
    assert 3 <= len(front) < len(rows) - 1   # the data has dominated points
    assert browser.evaluate(session, "document.querySelectorAll('#points tbody tr.front').length") == len(front)
    browser.evaluate(session, _click("points", "energy_j"))
    energies = browser.evaluate(session, _column("points", "energy_j"))
    assert energies[:-1] == pytest.approx(sorted(r["energy_j"] for r in rows if r["status"] == "ok"), rel=1e-3)
    assert browser.evaluate(session, "document.querySelector('#points tbody tr:last-child').textContent"
                            ).count("does not fit")   # the invalid point ('-') sorts last, its reason shown
    assert browser.problems(session) == []


def test_parallel_page_draws_the_pipeline_and_sorts(browser, tmp_path):
    """A 4-stage pipeline of 8 micro-batches: one bar per pass, as many as the JSON's schedule has, on 4 rows."""
    page, data = tmp_path / "parallel.html", tmp_path / "parallel.json"
    assert main(["train", "gpt2", "--system", "dgx_a100", "--devices", "8", "--parallel", "dp=2,pp=4,mb=8", "--batch",
                 "16", "--seq", "32", "--opt", "layers=4", "--opt", "hidden=64", "--opt", "heads=2", "--opt",
                 "vocab=256", "--html", str(page), "--json", str(data)]) == 0
    roles = json.loads(data.read_text())["devices"]
    session = browser.open(page.as_uri())
    assert browser.evaluate(session, "document.querySelectorAll('svg rect').length") == 4 * 8 * 2
    assert browser.evaluate(session, "document.querySelectorAll('#stages tbody tr').length") == len(roles) == 4
    browser.evaluate(session, _click("stages", "bubble"))
    assert browser.evaluate(session, _column("stages", "bubble")) == pytest.approx(sorted(r["bubble"] for r in roles))
    shot = tmp_path / "parallel.png"
    browser.screenshot(session, shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.problems(session) == []

"""tests/conftest.py makes a skip for a missing tool loud: listed at the end of a run, and a failure under CI."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SKIPPING = '''
import pytest

def test_needs_a_tool():
    pytest.skip("chromium is not installed (Debian package `chromium`)")

def test_skips_for_a_reason_of_its_own():
    pytest.skip("negative axes arrive in opset 11")
'''


@pytest.mark.parametrize("ci, code", [("", 0), ("true", 1)])
def test_a_missing_tool_is_said_and_fails_ci(tmp_path, ci, code):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {**os.environ, "CI": ci}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == code, done.stdout[-2000:]
    if not ci:
        assert "1 tests did not run: a tool is missing" in done.stdout and "chromium is not installed" in done.stdout

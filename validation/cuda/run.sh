#!/usr/bin/env bash
# The default GPU validation run, as one script, on a machine with an NVIDIA GPU whose Python already has PyTorch,
# Triton and accelsim's dependencies (numpy, numba, networkx, pyyaml, onnx, ml_dtypes, threadpoolctl, rich,
# matplotlib): no virtual environment, no network. Writes the dataset folder, then scores it and plots it.
#   validation/cuda/run.sh OUT_DIR [PRESET] [SUITE]      e.g. validation/cuda/run.sh validation/cuda/h200 h200
# Commit OUT_DIR under validation/cuda/ and tests/accelsim/validate/test_validation.py re-scores it on every commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: validation/cuda/run.sh OUT_DIR [PRESET] [SUITE]}
preset=${2:-h200}
suite=${3:-all}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/accelsim-numba}"
python3 - <<'PY'
import torch, triton
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}, "
      f"GPU: {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
PY
status=0
python3 -m accelsim.cli validate cuda --arch "$preset" --suite "$suite" --out "$out" || status=$?
python3 -m accelsim.cli validate score "$out" --plot "$out/predicted_vs_measured.png" || true
exit $status

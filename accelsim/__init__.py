"""accelsim: simulate AI models on accelerators described in YAML.

    import accelsim
    result = accelsim.run("resnet50", arch="tpu_v1")
    print(result.table()); result.to_json()
"""
from accelsim.api import evaluate, run
from accelsim.arch import load_arch
from accelsim.model import load_model
from accelsim.result import Result

__all__ = ["run", "evaluate", "load_arch", "load_model", "Result"]
__version__ = "0.1.0"

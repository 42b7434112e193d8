"""accelsim: simulate AI models on accelerators described in YAML.

    import accelsim
    result = accelsim.run("resnet50", arch="tpu_v1")
    print(result.table()); result.to_json()
"""
from accelsim.sim.api import evaluate, run
from accelsim.sim.model import load_arch
from accelsim.sim.model import load_model
from accelsim.out.result import Result

__all__ = ["run", "evaluate", "load_arch", "load_model", "Result"]
__version__ = "0.1.0"

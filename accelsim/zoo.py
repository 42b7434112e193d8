"""The built-in models, reachable as `accelsim.zoo.resnet50(batch=1)`; they live in `compiler.zoo`."""
from compiler.zoo import *  # noqa: F401,F403  (re-export: one zoo, two doors)
from compiler.zoo import MODELS, build  # noqa: F401

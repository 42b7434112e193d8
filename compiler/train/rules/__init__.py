"""Gradient rules, one module per family of ops; importing the package registers every rule in autodiff.RULES."""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

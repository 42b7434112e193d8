"""A stage priced at roofline fidelity, then at tile fidelity (a planner's lower bound, then its simulation), is built
once (accelsim.parallel.train.simulate_stage) and simulates as a fresh build does."""
from accelsim.arch import load_arch
from accelsim.parallel import train as parallel_train
from accelsim.parallel.train import simulate_stage, stage_key
from accelsim.sim.model import load_model
from accelsim.sim.train import simulate_step
from compiler.dtypes import DType
from compiler.train import Optimizer


def test_a_stage_priced_at_roofline_then_tile_is_built_once_and_simulates_as_a_fresh_build(monkeypatch):
    graph = load_model("gpt2", batch=2, layers=1, hidden=64, heads=4, seq=32, vocab=128)
    graph.outputs = graph.outputs[:1]
    hw, update = load_arch("a100"), Optimizer("adamw")
    bound_key, tile_key = (stage_key(graph, hw, DType.bf16, 2, 1, update, "cross_entropy", "none", fidelity, False)
                           for fidelity in ("roofline", "tile"))
    built, real = [], parallel_train.step_program
    monkeypatch.setattr(parallel_train, "step_program", lambda *args: built.append(args) or real(*args))
    parallel_train._STAGES.clear()
    parallel_train._BUILDS.clear()
    bound, _ = simulate_stage(bound_key, graph)
    assert len(parallel_train._BUILDS) == 1
    tiled, _ = simulate_stage(tile_key, graph)
    assert len(built) == 1 and len(parallel_train._BUILDS) == 0       # handed on, not kept twice
    assert simulate_stage(tile_key, graph)[0] is tiled and len(parallel_train._STAGES) == 2
    fresh, _ = simulate_step(graph, hw, DType.bf16, 2, 1, update, "cross_entropy", "none", "tile")
    assert tiled.result.fidelity == "tile" and bound.result.fidelity == "roofline"
    assert tiled.result.ops == fresh.result.ops and tiled.result.mappings == fresh.result.mappings
    assert tiled.memory == fresh.memory and tiled.layers == fresh.layers
    assert sum(op.seconds for op in bound.result.ops) <= sum(op.seconds for op in tiled.result.ops)

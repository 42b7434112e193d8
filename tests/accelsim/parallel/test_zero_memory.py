"""Memory per device under ZeRO as DeepSpeed and PyTorch FSDP hold it (Rajbhandari et al. 2020, sec. 5): the model
states by the paper's per-stage formulas over Nd data-parallel replicas, with Psi counted by hand, and a workspace
that names what it holds: the backward pass's temporaries, stage 2's gradient bucket, and for stage 3 the whole
weights of two layers (the one computing, the next prefetched) and one layer's whole gradient, never the stage's."""
import json

import pytest

from accelsim.parallel.train import train_parallel
from compiler import zoo

GPT = dict(seq=64, layers=4, hidden=64, heads=2, vocab=512, max_positions=64)
H, VOCAB, POSITIONS = GPT["hidden"], GPT["vocab"], GPT["max_positions"]
BLOCK = 2 * 2 * H + 4 * (H * H + H) + (H * 4 * H + 4 * H) + (4 * H * H + H)   # norms, attention, MLP
OUTSIDE = VOCAB * H + POSITIONS * H + 2 * H          # embeddings (the head is tied to them) and the final norm
BF16, K = 2, 12                                      # dgx_a100 trains in bf16; AdamW: fp32 master, m and v
TABLES = 16 * 1024                                   # at most: the zoo's causal mask and shape constants


def psi(layers: int) -> int:
    return OUTSIDE + layers * BLOCK


def step(plan: str, devices: int, **options):
    return train_parallel("gpt2", "dgx_a100", devices=devices, parallel=plan, batch=devices, optimizer="adamw",
                          fidelity="roofline", **{**GPT, **options})


def test_psi_by_hand_is_the_zoo_s_count():
    assert psi(4) == zoo.parameter_count(zoo.build("gpt2", weights=False, **GPT)) and BLOCK > OUTSIDE


@pytest.mark.parametrize("zero", range(4))
def test_model_states_follow_the_paper_s_formula_for_each_stage(zero):
    """stage 0: (2 + 2 + K)Psi; 1: 2Psi + 2Psi + K Psi / Nd; 2: 2Psi + (2 + K)Psi / Nd; 3: (2 + 2 + K)Psi / Nd, every
    gradient held (the update reads them all), whatever the liveness has at its own peak."""
    nd, whole = 8, psi(4)
    memory = step(f"dp={nd},zero={zero}", nd).memory
    share = {s: nd if zero >= s else 1 for s in (1, 2, 3)}
    assert BF16 * whole // share[3] <= memory["weights"] < (BF16 * whole + TABLES) // share[3]
    assert memory["gradients"] == BF16 * whole // share[2]
    assert memory["optimizer"] == K * whole // share[1]
    holds = memory["workspace_holds"]
    # the bucket being reduce-scattered: 25 MiB, or every gradient of a model this small
    assert holds["gradient_bucket"] == {0: 0, 1: 0, 2: BF16 * whole, 3: BF16 * BLOCK}[zero]
    assert holds["gathered_weights"] == (2 * BF16 * BLOCK if zero == 3 else 0)       # two blocks, whole
    assert memory["workspace"] == sum(holds.values())
    assert memory["peak"] == sum(memory[c] for c in ("weights", "gradients", "optimizer", "activations",
                                                     "workspace"))


def test_zero_leaves_the_backward_pass_s_own_temporaries_alone():
    temporaries = {step(f"dp=8,zero={z}", 8, recompute="full").memory["workspace_holds"]["temporaries"]
                   for z in range(4)}
    assert len(temporaries) == 1


def test_zero_3_workspace_does_not_grow_with_the_layers():
    """Full recomputation, short sequences: the step's end, with every update written, outweighs the activations.
    The weights' updates are cast back into the parameters (not kept beside them as workspace) and FSDP gathers two
    layers at a time, so 2, 4 and 8 layers hold the same workspace while their sharded model states grow."""
    memories = [step("dp=2,zero=3", 2, layers=n, seq=8, recompute="full").memory for n in (2, 4, 8)]
    assert len({m["workspace"] for m in memories}) == 1
    assert all(m["workspace_holds"]["gathered_weights"] == 2 * BF16 * BLOCK for m in memories)
    assert [m["optimizer"] for m in memories] == [K * psi(n) // 2 for n in (2, 4, 8)]


def test_the_report_names_what_the_workspace_holds_and_counts_the_model_once():
    result = step("dp=8,zero=3", 8)
    holds = result.memory["workspace_holds"]
    line = next(line for line in result.table().splitlines() if line.startswith("  workspace:"))
    assert "temporaries" in line and "gathered weights" in line and "gradient bucket" in line
    data = json.loads(result.to_json())
    assert data["memory"]["workspace_holds"] == holds and data["model"]["parameters"] == psi(4)
    assert data["devices"][0]["memory"]["workspace_holds"] == holds

"""The collective algorithm registry: the tuner, the CLI and system files read the names from it; a collective on
a multi-level slice can be priced as one algorithm per level (`ring,tree`), `auto` levels chosen by the tuner."""
import pytest

from accelsim.arch.system_load import systems_dir
from accelsim.cli import main
from accelsim.comm import ALGORITHMS, collective
from accelsim.comm.algorithms import available
from accelsim.comm.collective import network
from accelsim.comm.registry import OPS, PER_LEVEL, SLICE_WIDE, SliceWide, per_level_for, slice_wide_for
from compiler.errors import UserError

GiB = 1 << 30


def test_the_package_names_the_function_not_its_module():
    """`from accelsim.comm import collective` is the function, though its module is imported too."""
    import importlib

    module = importlib.import_module("accelsim.comm.collective")
    from accelsim.comm import collective as named

    assert callable(named) and named is module.collective


def test_every_algorithm_is_registered_simplest_first():
    assert ALGORITHMS == ("ring", "tree", "halving_doubling", "hierarchical", "torus", "nvls", "direct")
    assert slice_wide_for("alltoall") == ("direct",) and slice_wide_for("broadcast") == ("ring", "torus")
    assert per_level_for("allreduce") == ("ring", "tree", "nvls") and per_level_for("allgather") == ("ring", "nvls")
    assert all(set(a.ops) <= set(OPS) for a in (*SLICE_WIDE.values(), *PER_LEVEL.values()))


def test_an_algorithm_registered_once_is_chosen_asked_for_and_listed(monkeypatch, capsys):
    """One registration, and the tuner considers it, --algorithm accepts it and --help names it."""
    ring = SLICE_WIDE["ring"]
    monkeypatch.setitem(SLICE_WIDE, "ring_copy", SliceWide("ring_copy", 15, ("allreduce",), ring.expand,
                                                           ring.unavailable))
    net = network("dgx_a100", 8, None)
    assert list(available("allreduce", net)) == ["ring", "ring_copy", "tree", "halving_doubling", "hierarchical",
                                                     "torus", "nvls"]
    copy = collective("allreduce", "dgx_a100", 8, GiB, "ring_copy")
    assert copy.algorithm == "ring_copy" and copy.seconds == collective("allreduce", "dgx_a100", 8, GiB, "ring").seconds
    with pytest.raises(SystemExit):
        main(["collective", "--help"])
    assert "ring_copy" in " ".join(capsys.readouterr().out.split())


def test_a_list_of_rings_is_the_hierarchical_algorithm():
    """`ring,ring` on two levels is what `hierarchical` runs: a ring in each node, then across the nodes."""
    per_level = collective("allreduce", "dgx_a100", 16, GiB, "ring,ring")
    assert per_level.algorithm == "ring,ring"
    assert per_level.seconds == collective("allreduce", "dgx_a100", 16, GiB, "hierarchical").seconds


def test_nvls_is_nvlink_sharp_inside_and_a_tree_across_nodes():
    """NCCL's NVLSTree: the switch reduces inside the node, a tree across nodes; named per level, the same time."""
    assert collective("allreduce", "dgx_h100", 16, GiB, "nvls,tree").seconds == \
        collective("allreduce", "dgx_h100", 16, GiB, "nvls").seconds


def test_an_auto_level_takes_the_faster_of_its_algorithms():
    """`ring,auto`: the tuner prices a ring and a tree across the nodes and keeps the one with the smaller estimate."""
    chosen = collective("allreduce", "dgx_a100", 16, 64 << 10, "ring,auto")
    assert set(chosen.estimates) == {"ring,ring", "ring,tree"}
    assert chosen.algorithm == min(chosen.estimates, key=chosen.estimates.get)
    assert collective("allreduce", "dgx_a100", 16, 64 << 10, "ring,auto").seconds == \
        collective("allreduce", "dgx_a100", 16, 64 << 10, chosen.algorithm).seconds


@pytest.mark.parametrize("algorithm, message", [
    ("ring,tree,ring", r"names 3 levels; the slice crosses 2 \(nvlink, infiniband\)"),
    ("ring,butterfly", r"unknown per-level algorithm 'butterfly'; per-level algorithms: ring, tree, nvls, auto"),
    ("ring,nvls", r"nvls cannot run allreduce at level infiniband: infiniband does not reduce in the network"),
    ("ring,direct", r"unknown per-level algorithm 'direct'"),
])
def test_a_bad_per_level_list_is_a_user_error(algorithm, message):
    with pytest.raises(UserError, match=message):
        collective("allreduce", "dgx_a100", 16, GiB, algorithm)


def test_the_cli_names_the_value_and_the_registered_algorithms(capsys):
    assert main(["collective", "allreduce", "--system", "dgx_a100", "--devices", "16", "--algorithm", "butterfly"]) == 2
    assert "unknown algorithm 'butterfly'; algorithms: ring, tree, halving_doubling" in capsys.readouterr().err


def test_a_system_file_naming_an_unregistered_algorithm_is_refused(tmp_path):
    path = tmp_path / "dgx.yaml"
    text = (systems_dir() / "dgx_a100.yaml").read_text()
    path.write_text(text.replace("    algorithms: [ring, tree, direct]", "    algorithms: [ring, butterfly]"))
    with pytest.raises(UserError, match=r"dgx.yaml: protocols\[0\].algorithms\[1\]: unknown algorithm 'butterfly'; "
                                        r"algorithms: ring, tree"):
        collective("allreduce", path, 8, GiB)

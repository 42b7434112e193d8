"""The Triton kernel of one op for the tests: from the mapping given, else mapped with accelsim's cost model (the
compiler is handed it, as accelsim.sim.build hands it every mapping)."""
from accelsim.price.cost import reporter
from compiler.codegen.triton import triton_kernel


def kernel_of(op, arch, mapping=None):
    return triton_kernel(op, arch, mapping, report=reporter(arch, [op]))

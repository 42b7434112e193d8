"""Target facts, one home for each: the unit an op runs on and its compute dtype (units), where its operands
live and the levels they cross (placement), what a tile of each occupies (footprint), which operands a chunk
cuts (slicing), and how a mapped op spreads over a unit's instances (spread). The mapper, codegen, Triton codegen and
pricing all ask here."""
from compiler.targeting.footprint import (Footprints, Overflow, op_levels, operand_paths, operands, relevant_dims,
                                          separable, vector_extent)
from compiler.targeting.placement import activation_home, op_home, operand_path, role_path, vector_paths
from compiler.targeting.slicing import output_axis_to_input, sliced
from compiler.targeting.spread import (gemm_parts, gemm_sizes, instance_tile, k_split, per_instance, units_spread,
                                        units_used)
from compiler.targeting.units import compute_dtype, pick_unit, widen

__all__ = ["Footprints", "Overflow", "op_levels", "operand_paths", "operands", "relevant_dims", "separable",
           "vector_extent", "activation_home", "op_home", "operand_path", "role_path", "vector_paths", "gemm_parts",
           "gemm_sizes",
           "instance_tile", "k_split", "per_instance", "units_spread", "units_used", "compute_dtype", "pick_unit",
           "widen", "output_axis_to_input", "sliced"]

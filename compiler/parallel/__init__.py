"""Parallelism on the compiler side: a model cut into pipeline stages (`pipeline`), one rank's share of its
tensor-parallel layers with the collectives they imply (`tensor`); the system side (accelsim.parallel) prices them."""

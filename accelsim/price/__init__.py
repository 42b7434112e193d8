"""Pricing: turns the compiler's counts into time and energy. Compute models per arch kind (systolic, simt, simd,
vector), the Program's rows priced (program), the mapper's cost model (cost), the roofline bound, energy as
actions x energy per action, and how compute cycles are counted (compat). It never imports the mapper's search."""

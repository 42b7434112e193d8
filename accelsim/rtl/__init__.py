"""The systolic core of `rtl/` seen from Python: the stimulus both the RTL bench and the cycle-level model
read (docs/rtl.md), the simulator runner, the cocotb bench and the co-simulation command."""

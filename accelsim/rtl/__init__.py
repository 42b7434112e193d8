"""The systolic core of `rtl/` seen from Python: the simulator runner, the cocotb bench and the co-simulation
command (the stimulus both the RTL bench and the cycle-level model read is accelsim.sim.stimulus)."""

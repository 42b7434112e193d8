"""The cycle-level engine: a systolic PE grid stepped cycle by cycle (systolic: the weight-stationary core of
rtl/, equal to it in every output and cycle; systolic_os: an output-stationary array with no RTL)."""

"""Other tools' files and the host machine as accelsim data: SCALE-Sim .cfg files as arch YAML (scalesim), and a
simd preset for the machine accelsim runs on, read from lscpu, /proc and sysfs (host, host_preset)."""

"""What a simulation gives back and its views: the Result (per op and totals; JSON, CSV), the terminal table, the
Perfetto trace and VCD waveforms. It never runs the pipeline: a Result carries what its views draw."""

"""The compiler: a model becomes a Graph (frontend, zoo, builder), an IR (ops, passes), a Mapping per op (map) and a
tile Program (codegen). It never imports accelsim: the simulator prices and runs what the compiler counts."""

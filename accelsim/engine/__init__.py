"""The numba kernels: plain ints and arrays in, arrays out; no Graph, no Arch, no Python objects.

tile/: the event engine that runs a Program (DMA channels, compute units, dependencies) and blames stalls.
cycle/: the systolic PE grid stepped cycle by cycle (the RTL's model).
links/: transfers on the link channels of a system of devices (collectives), contending for them.
Imports only numpy and numba.
"""

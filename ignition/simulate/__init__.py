"""The simulation room: the real Helios scheduler and fixed baseline policies against
simulated devices, one instrument for capacity studies, ``ignition simulate`` and
benchmarks. Experiments do not run in Helios. Nothing here imports torch."""

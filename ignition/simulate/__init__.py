"""The simulation room: devices, workloads, baseline policies, harness and metrics.

Experiments do not run in Helios. This package drives the real Helios scheduler
(and fixed baseline policies) against simulated devices so that capacity studies,
``ignition simulate`` and benchmarks share one instrument. Nothing here imports torch.
"""

"""CPU cost of one Helios decision (plan()) on the catalog the runtime loads.

Run: python benchmarks/helios_plan.py [--json] [--iterations N] [--loop] [--phases]
Prints p50/p99 CPU time per plan() call per decode mode (off / fixed / adaptive) and
queue state (empty / one queued frame) at 1, 8 and 64 active requests; the
measurement lives in ignition.simulate.bench so tests and this script share it.
"""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    runpy.run_module("ignition.simulate.bench", run_name="__main__")

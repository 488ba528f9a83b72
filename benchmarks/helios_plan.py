"""CPU cost of one Helios decision (plan()) on the catalog the runtime loads.

Run: python benchmarks/helios_plan.py [--json] [--iterations N] [--loop] [--phases]
Prints p50/p99 CPU time per plan() call per decode mode (off / fixed / adaptive) and
queue state (empty / one queued frame) at 1, 8 and 64 active requests; the
measurement lives in scripts/scheduling_sim/plan_bench.py so tests and this script share
it. The repository root goes first on the path, so the checkout this script sits in is
the one measured (not an installed copy).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    runpy.run_module("scripts.scheduling_sim.plan_bench", run_name="__main__")

#!/usr/bin/env bash
# The GPU checks a session with a lent H200 runs in one go (budget: under 8 minutes), printing
# one table: kernels vs references (error, time, % of the 4.3 TB/s HBM roofline) at full-size
# head dims; capture of the whole qwen38 --mixed-prefill catalog (seconds, memory per program);
# replays under torch.cuda.set_sync_debug_mode("error"); the host-planning overlap ratio of a
# decode run; greedy tokens identical across speculation off/fixed/adaptive on captured graphs.
#   bash scripts/gpu_check.sh             (repository root, CUDA build of torch installed)
#   bash scripts/gpu_check.sh --dry-run   (CPU: the same plumbing at tiny sizes; run in CI)
# The full log is kept in $OUT (default /tmp/ignition-gpu-check); see scripts/gpu_check.py.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/ignition-gpu-check}
mkdir -p "$OUT"
timeout "${GPU_CHECK_TIMEOUT_S:-480}" "$PY" scripts/gpu_check.py "$@" 2>"$OUT/gpu_check.stderr"
status=$?
[ "$status" -eq 124 ] && echo "gpu_check: stopped at the ${GPU_CHECK_TIMEOUT_S:-480} s budget"
[ "$status" -ne 0 ] && echo "gpu_check: exit $status; stderr in $OUT/gpu_check.stderr"
exit "$status"

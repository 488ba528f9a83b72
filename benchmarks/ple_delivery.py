"""PLE row delivery per residency: gather throughput and exposed delay per frame (a benchmark).

Writes a table of a few hundred MiB in ``shard_N.safetensors`` pieces to a temporary folder
(160 bf16 values a row, as released), opens it at each residency and gathers the rows of
frames of ``--tokens`` tokens x ``--heads`` n-gram heads through the mailbox (the real
runtime path, ``ignition/runtime/ple/mailbox.py``):

- ``device``: the table in device memory (on CPU: one in-memory tensor);
- ``host``: the mapped shards, then ``host+preload`` (one copy in memory, pinned on CUDA);
- ``disk``: mapped, no preload, behind the row cache: ``cold`` drops the shards from the
  page cache first (posix_fadvise DONTNEED) and starts with an empty cache, ``warm`` repeats
  the same frames with every row cached.

Rows are drawn uniformly (the hash spreads n-grams over the table); warm frames reuse a
working set. Two exposures per frame: ``known`` publishes a frame's rows while the previous
frame "computes" (``--compute-ms`` of sleep, the overlap rows known before launch get), and
``made inside`` publishes and waits at once (draft rows).

Then tokens/s end to end per residency on a qwen4_exp model with tables of
``--e2e-table-mib`` made here (``benchmarks/ple_end_to_end.py``; ``--e2e-table-mib 0`` skips).

    PYTHONPATH=. .venv/bin/python benchmarks/ple_delivery.py [--table-mib 384] [--tokens 256]
        [--heads 8] [--frames 40] [--compute-ms 2] [--device cpu|cuda] [--threads 1]
        [--e2e-table-mib 256] [--e2e-requests 4] [--e2e-prompt 192] [--e2e-tokens 32]
        [--e2e-repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from ignition.runtime.ple.mailbox import Mailbox
from ignition.runtime.ple.store import open_store
from ignition.runtime.ple.table import read_layout, write_table

WIDTH = 160


def make_table(folder: Path, mib: int, num_shards: int = 4) -> None:
    rows = mib * (1 << 20) // (WIDTH * 2)
    per = rows // num_shards
    g = torch.Generator().manual_seed(0)
    pieces = [torch.randn(per, WIDTH, generator=g).to(torch.bfloat16) for _ in range(num_shards)]
    write_table(folder, pieces)


def drop_page_cache(folder: Path) -> bool:
    """Evict the shards' clean pages so the next reads come from the drive."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path in folder.glob("shard_*.safetensors"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def frames_of(num_rows: int, args, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (args.tokens, args.heads)
    return [torch.randint(0, num_rows, shape, generator=g) for _ in range(args.frames)]


def run(mailbox: Mailbox, frames: list[torch.Tensor], compute_s: float) -> tuple[float, float]:
    """(rows/s of the host thread's gathers, mean exposed ns per frame) over ``frames``.

    ``compute_s`` 0: each frame publishes and waits at once (rows made inside the program).
    Otherwise frame k+1 is published before frame k's compute (rows known before launch)."""
    exposed, gather_ns, previous_ready = 0, 0, 0
    pending = mailbox.publish(frames[0])
    for k in range(len(frames)):
        current = pending
        if compute_s > 0:
            if k + 1 < len(frames):
                pending = mailbox.publish(frames[k + 1])
            time.sleep(compute_s)  # the previous frame runs meanwhile
        mailbox.wait(current)
        mailbox.release(current)
        r = current.readiness
        exposed += r.exposed_ns
        gather_ns += r.ready_ns - max(r.requested_ns, previous_ready)  # the thread is serial
        previous_ready = r.ready_ns
        if compute_s == 0 and k + 1 < len(frames):
            pending = mailbox.publish(frames[k + 1])
    return sum(f.numel() for f in frames) / (gather_ns / 1e9), exposed / len(frames)


def measure(folder: Path, residency: str, args, frames, warm: bool, **kwargs) -> tuple:
    """(rows/s, exposed ns known, exposed ns made inside, cache hits, cache misses)."""
    device = torch.device(args.device)

    def fresh():
        if not warm:
            drop_page_cache(folder)
        store = open_store(read_layout(folder), residency, device, **kwargs)
        return store, Mailbox(store, pin=device.type == "cuda")

    store, mailbox = fresh()
    if warm:
        run(mailbox, frames, 0.0)  # fills the row cache and the page cache
    before = store.stats.snapshot()
    rate, inside = run(mailbox, frames, 0.0)
    if not warm:
        mailbox.close()
        store, mailbox = fresh()
        before = store.stats.snapshot()
    _, known = run(mailbox, frames, args.compute_ms / 1e3)
    after = store.stats.snapshot()
    mailbox.close()
    hits = after.cache_hits - before.cache_hits
    misses = after.cache_misses - before.cache_misses
    return rate, known, inside, hits, misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table-mib", type=int, default=384)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--compute-ms", type=float, default=2.0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (serve's: 1)")
    parser.add_argument("--e2e-table-mib", type=int, default=256)
    parser.add_argument("--e2e-requests", type=int, default=4)
    parser.add_argument("--e2e-prompt", type=int, default=192)
    parser.add_argument("--e2e-tokens", type=int, default=32)
    parser.add_argument("--e2e-repeats", type=int, default=3, help="passes; each case's best")
    parser.add_argument("--skip-rows", action="store_true", help="only the end-to-end table")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.skip_rows:
        rows_table(args)
    if args.e2e_table_mib > 0 and args.device == "cpu":
        from benchmarks.ple_end_to_end import print_end_to_end, run_end_to_end

        with tempfile.TemporaryDirectory(prefix="ple-e2e-") as tmp:
            print_end_to_end(run_end_to_end(Path(tmp), args, drop_page_cache))


def rows_table(args) -> None:
    with tempfile.TemporaryDirectory(prefix="ple-bench-") as tmp:
        folder = Path(tmp)
        began = time.perf_counter()
        make_table(folder, args.table_mib)
        layout = read_layout(folder)
        print(
            f"table {layout.table_bytes / 2**20:.0f} MiB, {layout.num_rows} rows x {WIDTH} bf16, "
            f"{len(layout.pieces)} shards (written in {time.perf_counter() - began:.1f} s); "
            f"frames of {args.tokens} tokens x {args.heads} heads = "
            f"{args.tokens * args.heads} rows, {args.frames} frames, "
            f"overlap {args.compute_ms} ms; device {args.device}, {args.threads} torch threads"
        )
        cold = frames_of(layout.num_rows, args, seed=1)
        cache = 2 * args.frames * args.tokens * args.heads * layout.row_bytes
        cases = [
            ("device", "device", cold, True, {}),
            ("host", "host", cold, True, {}),
            ("host+preload", "host", cold, True, {"preload": True}),
            ("disk cold", "disk", cold, False, {"cache_bytes": cache}),
            ("disk warm", "disk", cold, True, {"cache_bytes": cache}),
        ]
        results = {}
        print(
            "| residency | rows/s | exposed us/frame, known | exposed us/frame, made inside "
            "| cache hit rate | rows/s, device / this |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for label, residency, frames, warm, kwargs in cases:
            rate, known, inside, hits, misses = measure(
                folder, residency, args, frames, warm, **kwargs
            )
            results[label] = rate
            hit = f"{hits / (hits + misses):.2f}" if hits + misses else "-"
            print(
                f"| {label} | {rate:,.0f} | {known / 1e3:,.1f} | {inside / 1e3:,.1f} | {hit} | "
                f"{results['device'] / rate:.2f} |"
            )


if __name__ == "__main__":
    main()

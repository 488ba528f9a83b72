"""The GPU check's PLE section (docs/ple.md, "What runs on a GPU"): the table off the device.

Rows:

- ``uva gather = reference``: a table preloaded into pinned host memory (host residency with
  ``--ple-preload``), gathered by the Triton kernel through its device view (unified
  virtual addressing), equals the reference gather on the host; milliseconds per gather.
- ``mailbox delay in replay``: a captured graph whose program asks the in-graph mailbox
  (publish the ids into mapped memory, spin on the mapped ready flag) is replayed with a
  host thread that answers at once and with one delayed by ``DELAY_MS``: the delayed
  replay's interval (CUDA events around ``graph.replay()``) holds the delay (the detail
  prints both intervals and their difference), the answer's ``ready - needed`` is at least
  the delay, and the rows equal the table's.

The dry run (CPU) runs the same code eagerly with the reference kernels: the interval is
the host's, and no graph is captured.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

NUM_ROWS, WIDTH = 4096, 160
DELAY_MS = 40.0
NO_ROW = torch.iinfo(torch.int64).max


def check_ple(s, row: Callable[..., object]) -> list:
    """``s``: the check's Setup; ``row(section, check, ok, detail)`` makes one table row."""
    from ignition.runtime.ple.store import open_store
    from ignition.runtime.ple.table import write_table

    with tempfile.TemporaryDirectory() as folder:
        values = torch.randn(NUM_ROWS, WIDTH).to(torch.bfloat16)
        layout = write_table(folder, list(torch.chunk(values, 4)))
        rows = [_check_gather(s, row, open_store(layout, "host", s.device, preload=True), values)]
        rows.append(_check_mailbox(s, row, open_store(layout, "disk", s.device), values))
    return rows


def _ids(device: torch.device, n: int = 2048) -> torch.Tensor:
    ids = torch.randint(0, NUM_ROWS, (n,), generator=torch.Generator().manual_seed(0))
    ids[::9] = NO_ROW
    return ids.to(device)


def _expected(values: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    ids = ids.cpu()
    out = values[ids.clamp(max=NUM_ROWS - 1)]
    out[ids == NO_ROW] = 0
    return out


def _check_gather(s, row, store, values: torch.Tensor):
    from ignition.kernels import ops
    from ignition.runtime.ple.graph_mailbox import uva_table

    table = uva_table(store, s.device)
    ids = _ids(s.device)
    out = torch.full((ids.shape[0], WIDTH), float("nan"), dtype=table.dtype, device=s.device)
    ops.gather_rows(table, ids, out)
    _sync(s.device)
    began = time.perf_counter()
    for _ in range(10):
        ops.gather_rows(table, ids, out)
    _sync(s.device)
    ms = (time.perf_counter() - began) * 100
    ok = torch.equal(out.cpu(), _expected(values, ids))
    gib_s = ids.shape[0] * WIDTH * 2 / (ms / 1e3) / 2**30
    return row("ple", "uva gather = reference", ok,
               f"{ids.shape[0]} rows x {WIDTH} bf16 from pinned host: {ms:.3f} ms "
               f"({gib_s:.1f} GiB/s); table on {table.device}")  # fmt: skip


def _check_mailbox(s, row, store, values: torch.Tensor):
    from ignition.runtime.ple.graph_mailbox import GraphMailbox

    ids = _ids(s.device, 256)
    out = torch.zeros(ids.shape[0], WIDTH, dtype=torch.bfloat16, device=s.device)
    asked = torch.where(ids == NO_ROW, torch.full_like(ids, -1), ids)
    mailbox = GraphMailbox(store, ids.shape[0], s.device)

    def program() -> None:
        out.copy_(mailbox.ask(asked))

    try:
        run = _capture(s, program)
        mailbox.take_readiness()  # the warm-up's answer
        fast_ms = _timed(s, run)
        fast = mailbox.take_readiness()
        mailbox.delay_s = DELAY_MS / 1e3
        slow_ms = _timed(s, run)
        slow = mailbox.take_readiness()
    finally:
        mailbox.close()
    rows_ok = torch.equal(out.cpu(), _expected(values, ids))
    exposed_ms = slow[-1].exposed_ns / 1e6 if slow else 0.0
    status_ok = int(mailbox.status[0]) == 1
    ok = (rows_ok and status_ok and len(fast) == 1 and len(slow) == 1
          and slow_ms >= DELAY_MS and exposed_ms >= DELAY_MS)  # fmt: skip
    where = "graph replay" if s.device.type == "cuda" else "eager (dry run)"
    return row("ple", "mailbox delay in replay", ok,
               f"{where}: {fast_ms:.2f} ms at once, {slow_ms:.2f} ms with a {DELAY_MS:.0f} ms "
               f"host (+{slow_ms - fast_ms:.2f}); ready - needed {exposed_ms:.2f} ms; rows "
               f"{'=' if rows_ok else '!='} table")  # fmt: skip


def _capture(s, program: Callable[[], None]) -> Callable[[], None]:
    """The graph's replay on CUDA (warmed up once, eagerly, as the runtime does); the eager
    program on CPU."""
    if s.device.type != "cuda":
        return program
    program()
    torch.cuda.synchronize(s.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        program()
    torch.cuda.synchronize(s.device)
    return graph.replay


def _timed(s, run: Callable[[], None]) -> float:
    if s.device.type != "cuda":
        began = time.perf_counter()
        run()
        return (time.perf_counter() - began) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_ple_greedy(s, row: Callable[..., object]) -> list:
    """The served path: a tiny random qwen4_exp checkpoint (two PLE layers, an MTP head)
    generates the same greedy tokens with its table on the device, in preloaded pinned host
    memory (UVA gather inside the captured programs) and on disk (in-graph mailbox), with
    speculation off and adaptive. Needs transformers (the checkpoint writer)."""
    from ignition.components.capacity import plan_catalog
    from ignition.components.catalog import Catalog
    from ignition.components.program_kinds import GraphKind
    from ignition.model.weights import load_model
    from ignition.recipes import LoadOptions, get_recipe
    from ignition.runtime.assembly import RuntimeOptions, assemble_engine
    from ignition.runtime.ple.delivery import PleOptions
    from ignition.runtime.ple.model import open_in_graph, open_model_ple
    from tests.model.hf_checkpoints import write_qwen4_exp
    from tests.runtime.test_ple_residency_greedy import waves
    from tests.runtime.test_retention_differential import _run
    from tests.runtime.tiny import EOS, CharDecoder

    full = plan_catalog(get_recipe("qwen4-exp"),
                        LoadOptions(mixed_prefill=True, max_prefill_chunk=64))  # fmt: skip
    catalog = Catalog(
        full.recipe,
        full.options,
        tuple(d for d in full.descriptors if d.kind is not GraphKind.VISION),
    )
    rows = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        write_qwen4_exp(folder, seed=5, mtp=True)
        model = load_model(folder, s.device)
        for speculation in ("off", "adaptive"):
            outputs, details = {}, []
            for residency, preload in (("device", False), ("host", True), ("disk", False)):
                options = PleOptions(residency, preload, 16 * 64)
                in_graph = open_in_graph(folder, options, s.device, model)
                runtime = RuntimeOptions(
                    num_slots=4, page_size=16, max_context_tokens=256, speculation=speculation,
                    mixed=True, snapshot_rows=4, checkpoint_payoff=False,
                )  # fmt: skip
                engine = assemble_engine(
                    model,
                    catalog,
                    CharDecoder(),
                    [EOS],
                    runtime,
                    before_capture=in_graph.bind if in_graph else None,
                )
                ple = open_model_ple(folder, options, s.device, engine.worker, model,
                                     in_graph=in_graph)  # fmt: skip
                outputs[residency] = _run(engine, waves())
                snap = ple.stats.snapshot()
                details.append(
                    f"{residency}: {snap.rows_gathered} rows, "
                    f"{snap.exposed_ns / max(1, snap.frames) / 1e3:.0f} us/frame"
                )
                for closing in (ple.mailbox, in_graph):
                    if closing is not None:
                        closing.close()
            ok = outputs["host"] == outputs["device"] == outputs["disk"]
            rows.append(row("ple", f"greedy device == host+preload == disk ({speculation})",
                            ok, "; ".join(details)))  # fmt: skip
    return rows

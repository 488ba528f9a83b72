"""A frame's PLE rows, from its plan to the worker's ExecutionTiming.

The worker calls :meth:`FrameDelivery.publish` at the start of ``launch`` with the rows
known before launch (prompt-chunk tokens: the worker holds the prompt and its cursor),
:meth:`~FrameDelivery.await_rows` where the program needs them, and
:meth:`~FrameDelivery.finish` once the frame completed, which releases the staging buffers
and returns the frame-owned readiness timestamps and the exposed delay the worker reports
as ``readiness_stall_ns`` (Helios subtracts it from the cost sample only).

The row-id function is the model layer's (issue 31): token ids plus the request's n-gram
context to global row ids. Until it lands, tests and the benchmark use
:func:`modulo_row_ids`, a stand-in with the same signature and no claim to the real hash.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ignition.helios import LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.ple_mailbox import Delivery, Mailbox, Readiness, frame_exposed_ns
from ignition.runtime.ple_stats import PleStats
from ignition.runtime.ple_store import (
    DEFAULT_CACHE_BYTES,
    RESIDENCIES,
    RowStore,
    choose_residency,
    open_store,
)
from ignition.runtime.ple_table import TableLayout, find_layout

# (token ids [T], the request's context before them [context_size]) -> row ids [T, heads]
RowIdFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NO_TABLE = "no PLE table"


@dataclass(frozen=True)
class PleOptions:
    """``--ple-residency`` (None: chosen from the table and memory sizes), ``--ple-preload``
    and ``--ple-cache-bytes``."""

    residency: str | None = None
    preload: bool = False
    cache_bytes: int = DEFAULT_CACHE_BYTES

    def __post_init__(self) -> None:
        if self.residency is not None and self.residency not in RESIDENCIES:
            raise ValueError(
                f"--ple-residency = {self.residency!r}: one of {', '.join(RESIDENCIES)}"
            )
        if self.cache_bytes < 0:
            raise ValueError(f"--ple-cache-bytes = {self.cache_bytes}: must be nonnegative")

    def to_json(self) -> dict[str, Any]:
        return {"residency": self.residency or "auto", "preload": self.preload,
                "cache_bytes": self.cache_bytes}  # fmt: skip


_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
          "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}  # fmt: skip
_BYTES = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?", re.IGNORECASE)


def parse_bytes(text: str, flag: str = "--ple-cache-bytes") -> int:
    """``4GiB``, ``512MiB``, ``1G`` or a plain count; anything else is one line."""
    match = _BYTES.fullmatch(str(text).strip())
    if match is None:
        raise ValueError(f"{flag} = {text!r}: a byte count such as 1073741824, 512MiB or 4GiB")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def describe_table(
    options: PleOptions, layout: TableLayout | None, residency: str | None = None
) -> dict[str, Any]:
    """The build report's and the manifest's PLE entry."""
    if layout is None:
        return {"table": NO_TABLE, **options.to_json()}
    return {
        "table": "n-gram",
        "table_bytes": layout.table_bytes,
        "num_rows": layout.num_rows,
        "row_width": layout.row_width,
        "dtype": str(layout.dtype).removeprefix("torch."),
        "num_shards": len(layout.pieces),
        **options.to_json(),
        "residency": residency or options.residency or "auto",
    }


def modulo_row_ids(num_heads: int, num_rows: int, context_size: int = 2) -> RowIdFunction:
    """A STAND-IN row-id function (tests, benchmark): each head mixes the token with its
    context by fixed odd multipliers, modulo its own share of the table. Not the model's
    hash; only its signature and output shape are the seam's."""
    share = num_rows // num_heads
    multipliers = torch.tensor([[2 * (7919 * h + j) + 1 for j in range(context_size + 1)]
                                for h in range(num_heads)], dtype=torch.int64)  # fmt: skip

    def row_ids(tokens: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        history = torch.cat([context.to(torch.int64), tokens.to(torch.int64)])
        windows = history.unfold(0, context_size + 1, 1)[-len(tokens) :]  # [T, n]
        mixed = windows @ multipliers.T  # [T, heads]
        return mixed.remainder(share) + torch.arange(num_heads) * share

    return row_ids


class FrameDelivery:
    """Rows known before launch, through the mailbox, with their readiness timestamps.

    ``inside_interval``: whether the wait lies inside the frame's measured device interval
    (CPU: the worker waits there, as the program would; CUDA: the host waits before the
    graph is enqueued, so the stall is host time, outside the replay interval, and reporting
    it would under-estimate the graph). Only such a stall is reported to Helios.
    """

    def __init__(
        self,
        mailbox: Mailbox,
        row_ids: RowIdFunction,
        context_size: int,
        pad_id: int,
        inside_interval: bool = True,
    ) -> None:
        self.mailbox = mailbox
        self.row_ids = row_ids
        self.context_size = context_size
        self.pad_id = pad_id
        self.inside_interval = inside_interval

    @property
    def stats(self):
        return self.mailbox.store.stats

    def publish(
        self,
        plan: ScheduledPlan,
        prompt_ids: Mapping[RequestHandle, Sequence[int]],
        cursors: Mapping[RequestHandle, int],
    ) -> list[Delivery]:
        """Publish the rows of the plan's prompt chunks (``cursors``: each request's
        next prompt position before this frame)."""
        deliveries = []
        for lane in plan.lanes:
            if lane.role is not LaneRole.PROMPT or not lane.num_prompt_tokens:
                continue
            ids = prompt_ids[lane.handle]
            start = cursors.get(lane.handle, 0)
            chunk = torch.tensor(ids[start : start + lane.num_prompt_tokens], dtype=torch.int64)
            before = list(ids[max(0, start - self.context_size) : start])
            context = [self.pad_id] * (self.context_size - len(before)) + before
            rows = self.row_ids(chunk, torch.tensor(context, dtype=torch.int64))
            deliveries.append(self.mailbox.publish(rows))
        return deliveries

    def await_rows(self, deliveries: Sequence[Delivery]) -> list[torch.Tensor]:
        return [self.mailbox.wait(d) for d in deliveries]

    def discard(self, deliveries: Sequence[Delivery]) -> None:
        """A frame that failed before it ran: wait out the thread, free the staging."""
        for d in deliveries:
            d.done.wait()
            self.mailbox.release(d)

    def finish(self, deliveries: Sequence[Delivery]) -> tuple[tuple[Readiness, ...], int]:
        """Release the frame's staging; (its readiness timestamps, the exposed delay to
        report as ``readiness_stall_ns``)."""
        for d in deliveries:
            self.mailbox.release(d)
        readiness = tuple(d.readiness for d in deliveries)
        exposed = frame_exposed_ns(readiness)
        if deliveries:
            self.stats.add_frame(exposed)
        return readiness, exposed if self.inside_interval else 0


@dataclass
class PleRuntime:
    """What serving holds: the store (None: no table) and its counters for /metrics."""

    options: PleOptions
    stats: PleStats
    store: RowStore | None = None
    mailbox: Mailbox | None = None

    @property
    def residency(self) -> str:
        return self.stats.snapshot().residency


def open_ple(
    checkpoint: str | Path,
    options: PleOptions,
    device: torch.device,
    worker: Any = None,
    row_ids: RowIdFunction | None = None,
    context_size: int = 2,
    pad_id: int = 0,
) -> PleRuntime:
    """Open the checkpoint's table at its residency; with the model's ``row_ids`` (the
    qwen4_exp layer), host and disk rows reach ``worker`` through the mailbox. Without a
    table the options are accepted and the counters say "none"."""
    layout = find_layout(checkpoint)
    if layout is None:
        return PleRuntime(options, PleStats("none", 0))
    residency = options.residency or choose_residency(layout.table_bytes, device)
    store = open_store(
        layout, residency, device, preload=options.preload, cache_bytes=options.cache_bytes
    )
    runtime = PleRuntime(options, store.stats, store)
    if row_ids is not None and worker is not None and residency != "device":
        runtime.mailbox = Mailbox(store, pin=device.type == "cuda")
        worker.ple = FrameDelivery(
            runtime.mailbox, row_ids, context_size, pad_id, device.type != "cuda"
        )
    return runtime

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ignition.helios import LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.ple_mailbox import Delivery, Mailbox, Readiness, frame_exposed_ns
from ignition.runtime.ple_store import DEFAULT_CACHE_BYTES, RESIDENCIES
from ignition.runtime.ple_table import TableLayout

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

"""A frame's PLE rows, from its plan to the worker's ExecutionTiming."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ignition.helios import LaneRole, RequestHandle, ScheduledPlan
from ignition.runtime.ple.mailbox import Delivery, Mailbox, Readiness, frame_exposed_ns
from ignition.runtime.ple.stats import PleStats
from ignition.runtime.ple.store import (
    DEFAULT_CACHE_BYTES,
    RESIDENCIES,
    RowStore,
    choose_residency,
    open_store,
)
from ignition.runtime.ple.table import TableLayout, find_layout

# (token ids [T], the request's context before them [context_size]) -> row ids [T, heads]
RowIdFunction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
NO_TABLE = "no PLE table"


@dataclass(frozen=True)
class PleOptions:
    """``--ple-residency``, ``--ple-preload`` and ``--ple-cache-bytes``; None: not named."""

    residency: str | None = None
    preload: bool | None = None
    cache_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.residency is not None and self.residency not in RESIDENCIES:
            raise ValueError(
                f"--ple-residency = {self.residency!r}: one of {', '.join(RESIDENCIES)}"
            )
        if self.cache_bytes is not None and self.cache_bytes < 0:
            raise ValueError(f"--ple-cache-bytes = {self.cache_bytes}: must be nonnegative")

    @property
    def preloads(self) -> bool:
        return bool(self.preload)

    @property
    def cache_bound(self) -> int:
        return DEFAULT_CACHE_BYTES if self.cache_bytes is None else self.cache_bytes

    def over(self, built: Mapping[str, Any], where: str = "manifest.json") -> PleOptions:
        """These options where named, the built bundle's where not."""
        residency, preload, cache = self.residency, self.preload, self.cache_bytes
        built_residency = built.get("residency")
        if residency is None and built_residency not in (None, "auto"):
            if built_residency not in RESIDENCIES:
                raise ValueError(f"{where}: ple.residency = {built_residency!r}: one of "
                                 f"{', '.join(RESIDENCIES)}")  # fmt: skip
            residency = built_residency
        if preload is None and built.get("preload") is not None:
            if not isinstance(built["preload"], bool):
                raise ValueError(f"{where}: ple.preload = {built['preload']!r}: true or false")
            preload = built["preload"]
        if cache is None and built.get("cache_bytes") is not None:
            value = built["cache_bytes"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}: ple.cache_bytes = {value!r}: a byte count")
            cache = value
        return PleOptions(residency, preload, cache)

    def to_json(self) -> dict[str, Any]:
        return {"residency": self.residency or "auto", "preload": self.preloads,
                "cache_bytes": self.cache_bound}  # fmt: skip


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
    """A stand-in row-id function for tests and benchmarks (not the model's hash)."""
    share = num_rows // num_heads
    multipliers = torch.tensor([[2 * (7919 * h + j) + 1 for j in range(context_size + 1)]
                                for h in range(num_heads)], dtype=torch.int64)  # fmt: skip

    def row_ids(tokens: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        history = torch.cat([context.to(torch.int64), tokens.to(torch.int64)])
        windows = history.unfold(0, context_size + 1, 1)[-len(tokens) :]  # [T, n]
        mixed = windows @ multipliers.T  # [T, heads]
        return mixed.remainder(share) + torch.arange(num_heads) * share

    return row_ids


@dataclass(frozen=True)
class LayerRows:
    """One PLE layer's row-id function, its offset in the concatenated table and its FP8 scale."""

    row_ids: RowIdFunction
    offset: int = 0
    scale: torch.Tensor | None = None


@dataclass(frozen=True)
class KnownTokens:
    """Tokens of one frame the host can name before launch, with their n-gram context."""

    tokens: tuple[int, ...]
    context: tuple[int, ...]


def known_tokens(history: Sequence[int], start: int, count: int, context_size: int,
                 pad_id: int) -> KnownTokens:  # fmt: skip
    """``history[start : start + count]`` with the ids before it, padded with ``pad_id``."""
    before = list(history[max(0, start - context_size) : start])
    context = [pad_id] * (context_size - len(before)) + before
    return KnownTokens(tuple(history[start : start + count]), tuple(context))


class FrameDelivery:
    """PLE rows through the mailbox, with their readiness timestamps."""

    def __init__(
        self,
        mailbox: Mailbox,
        row_ids: RowIdFunction | Sequence[LayerRows],
        context_size: int,
        pad_id: int,
        inside_interval: bool = True,
        in_graph: Any = None,
    ) -> None:
        self.mailbox = mailbox
        self.layers = [LayerRows(row_ids)] if callable(row_ids) else list(row_ids)
        self._starts = torch.tensor([layer.offset for layer in self.layers], dtype=torch.int64)
        self.context_size = context_size
        self.pad_id = pad_id
        self.inside_interval = inside_interval
        # CUDA: the programs' capturable row source (in_graph.InGraphRows); its mailbox
        # answers are in-program deliveries whose waits lie inside the replay interval
        self.in_graph = in_graph
        self._made_inside: list[Delivery] = []  # the running frame's in-program deliveries

    @property
    def stats(self):
        return self.mailbox.store.stats

    def publish(
        self,
        plan: ScheduledPlan,
        prompt_ids: Mapping[RequestHandle, Sequence[int]],
        cursors: Mapping[RequestHandle, int],
        pending: Mapping[RequestHandle, Sequence[int]] | None = None,
    ) -> list[Delivery]:
        """Publish the rows of the plan's prompt chunks and of the pending tokens the host read."""
        known = []
        for lane in plan.lanes:
            if lane.role is LaneRole.PROMPT and lane.num_prompt_tokens:
                start = cursors.get(lane.handle, 0)
                known.append(known_tokens(prompt_ids[lane.handle], start,
                                          lane.num_prompt_tokens, self.context_size,
                                          self.pad_id))  # fmt: skip
            elif lane.role is LaneRole.DECODE and pending and lane.handle in pending:
                history = pending[lane.handle]
                known.append(known_tokens(history, len(history) - 1, 1, self.context_size,
                                          self.pad_id))  # fmt: skip
        return self.publish_tokens(known)

    def publish_tokens(self, known: Sequence[KnownTokens]) -> list[Delivery]:
        """One delivery for every layer's distinct rows of ``known`` (none if empty)."""
        known = [k for k in known if k.tokens]
        if not known:
            return []
        per_layer = []
        for layer in self.layers:
            ids = [
                layer.row_ids(torch.tensor(k.tokens, dtype=torch.int64),
                              torch.tensor(k.context, dtype=torch.int64)).reshape(-1)
                for k in known
            ]  # fmt: skip
            per_layer.append(torch.unique(torch.cat(ids)) + layer.offset)  # sorted
        delivery = self.mailbox.publish(torch.cat(per_layer))
        delivery.parts = tuple(len(ids) for ids in per_layer)
        return [delivery]

    def await_rows(self, deliveries: Sequence[Delivery]) -> list[torch.Tensor]:
        return [self.mailbox.wait(d) for d in deliveries]

    def layer_rows(
        self, delivery: Delivery, rows: torch.Tensor, dtype: torch.dtype
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A known delivery split per PLE layer: sorted global ids and their rows."""
        parts, first = [], 0
        for layer, count in zip(self.layers, delivery.parts, strict=True):
            ids, values = delivery.row_ids[first : first + count], rows[first : first + count]
            parts.append((ids, self._expand(values, layer.scale, dtype)))
            first += count
        return parts

    @staticmethod
    def _expand(rows: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype):
        if scale is None:
            return rows
        from ignition.model.quant import dequantize_rows

        return dequantize_rows(rows, scale, dtype)

    def resolve_inside(self, row_ids: torch.Tensor) -> torch.Tensor:
        """The program's mailbox: serve the rows it could not find staged."""
        ids = row_ids.to("cpu", torch.int64)
        delivery = self.mailbox.publish(ids)
        try:
            rows = self.mailbox.wait(delivery).clone()
        finally:
            self.mailbox.release(delivery)
        self._made_inside.append(delivery)
        if all(layer.scale is None for layer in self.layers):
            return rows
        layer_of = torch.searchsorted(self._starts, ids, right=True) - 1
        out = torch.empty(rows.shape, dtype=torch.float32)
        for index, layer in enumerate(self.layers):
            mine = layer_of == index
            out[mine] = self._expand(rows[mine], layer.scale, torch.float32)
        return out

    def take_inside(self) -> tuple[Delivery, ...]:
        """The in-program deliveries of the frame that just ran (and forget them)."""
        made, self._made_inside = tuple(self._made_inside), []
        return made

    def discard(self, deliveries: Sequence[Delivery]) -> None:
        """A frame that failed before it ran: wait out the thread, free the staging."""
        for d in deliveries:
            d.done.wait()
            self.mailbox.release(d)
        self._made_inside.clear()

    def finish(
        self, deliveries: Sequence[Delivery], inside: Sequence[Delivery] = ()
    ) -> tuple[tuple[Readiness, ...], int]:
        """Release the frame's staging; its readiness timestamps and exposed delay."""
        for d in deliveries:
            self.mailbox.release(d)
        readiness = tuple(d.readiness for d in (*deliveries, *inside))
        in_graph = () if self.in_graph is None else self.in_graph.take_readiness()
        exposed = frame_exposed_ns(readiness)
        graph_exposed = frame_exposed_ns(in_graph)
        if readiness or in_graph:
            self.stats.add_frame(exposed + graph_exposed)
        reported = (exposed if self.inside_interval else 0) + graph_exposed
        return readiness + in_graph, reported


@dataclass
class PleRuntime:
    """What serving holds: the store (None: no table) and its counters for /metrics."""

    options: PleOptions
    stats: PleStats
    store: RowStore | None = None
    mailbox: Mailbox | None = None
    delivery: FrameDelivery | None = None  # what the worker was given (host / disk on CPU)

    @property
    def residency(self) -> str:
        return self.stats.snapshot().residency


def resolve_residency(options: PleOptions, layout: TableLayout, device: torch.device) -> str:
    """``--ple-residency``, else the default for the table's size and the memory."""
    return options.residency or choose_residency(layout.table_bytes, device)


def delivers_rows(residency: str, device: torch.device) -> bool:
    """Whether the rows reach the programs through a delivery (host or disk residency)."""
    from ignition.runtime.ple.in_graph import in_graph_enabled

    return residency != "device" and (device.type != "cuda" or in_graph_enabled())


def open_ple(
    checkpoint: str | Path,
    options: PleOptions,
    device: torch.device,
    worker: Any = None,
    row_ids: RowIdFunction | Sequence[LayerRows] | None = None,
    context_size: int = 2,
    pad_id: int = 0,
    layout: TableLayout | None = None,
    in_graph: Any = None,
) -> PleRuntime:
    """Open the checkpoint's table at its residency, delivering its rows to ``worker``."""
    layout = layout if layout is not None else find_layout(checkpoint)
    if layout is None:
        return PleRuntime(options, PleStats("none", 0))
    residency = resolve_residency(options, layout, device)
    if in_graph is not None:
        store = in_graph.store
    else:
        store = open_store(
            layout, residency, device, preload=options.preloads, cache_bytes=options.cache_bound
        )
    runtime = PleRuntime(options, store.stats, store)
    on_cuda = device.type == "cuda"
    if on_cuda and in_graph is None:
        return runtime
    if row_ids is not None and worker is not None and delivers_rows(residency, device):
        runtime.mailbox = Mailbox(store, pin=on_cuda)
        delivery = runtime.delivery = FrameDelivery(
            runtime.mailbox, row_ids, context_size, pad_id, not on_cuda, in_graph
        )
        attach = getattr(worker, "attach_ple", None)
        if attach is not None:
            attach(delivery)
        else:
            worker.ple = delivery
    return runtime

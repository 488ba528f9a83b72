"""Builds one decision's view of the requests, projected to the queue's expected end.

Each queued frame contributes its frozen expected service and estimated duration
to copies of the request prices, as if it completed as expected; a request with a
queued expected delivery ages from that expected delivery; output limits and
positions account for each queued lane's maximum advance. Projection never
changes stored rates, publishes output or commits state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ignition.components.catalog import Descriptor
from ignition.helios import utility
from ignition.helios.config import PolicyConfig
from ignition.helios.cost import CostModel
from ignition.helios.normalizer_core import VECTOR_RULES, catalog_arrays, vector_normalizers
from ignition.helios.policy import Population
from ignition.helios.queue import ExecutionQueue
from ignition.helios.requests import RequestState
from ignition.helios.service import (
    Normalizers,
    Prices,
    decay,
    normalizers,
    projected_prices,
    stream_family,
)
from ignition.helios.terminal import TerminalView
from ignition.helios.types import LaneRole, RequestHandle
from ignition.helios.utility import Decision, LaneView


def measured(descriptors: Iterable[Descriptor], costs: CostModel) -> list[tuple[Descriptor, float]]:
    """Measured costs (stale ones included) in ms."""
    out = []
    for d in descriptors:
        estimate = costs.estimate_ns(d)
        if estimate > 0:
            out.append((d, estimate / 1e6))
    return out


def current_normalizers(
    descriptors: Sequence[Descriptor], costs: CostModel, requests: Iterable[RequestState]
) -> Normalizers:
    """Normalizers of the measured catalog; the token rate is the newcomer rule's start
    (``utility.newcomer_token_rate``), used for prices and the first service update."""
    # Every decision runs this over every request: count by proposal source (plain
    # attribute reads), then map the few sources to their families.
    num_live = 0
    by_source: dict[str, int] = {}
    for r in requests:
        if r.is_finished or r.is_cancelled or r.is_preempted:
            continue  # not live
        num_live += 1
        spec = r.spec
        if r.prompt_position >= spec.num_prompt_tokens:  # a decoder
            source = spec.proposal_source
            by_source[source] = by_source.get(source, 0) + 1
    families: dict[str, int] = {}
    for source, count in by_source.items():
        family = stream_family(source)
        families[family] = families.get(family, 0) + count
    decoders = sum(families.values())
    # Normalizers read estimates only: an observation that leaves every estimate as it
    # was (the median window absorbed it) changes no normalizer.
    key = (id(descriptors), costs.estimates_version, num_live, tuple(sorted(families.items())))
    cached = costs.derived.get("normalizers")
    if cached is not None and cached[0] == key:
        return cached[1]
    rule = utility.NEWCOMER_RULE
    if rule in VECTOR_RULES:
        arrays = catalog_arrays(descriptors, costs)
        norms = vector_normalizers(arrays, num_live, decoders, families, rule)
    else:
        graphs = measured(descriptors, costs)
        norms = normalizers(graphs, num_live, decoders, families)
        start = utility.newcomer_token_rate(graphs, num_live)
        if start is not None:
            by_family = {f: replace(n, token_rate=start) for f, n in norms.by_family.items()}
            norms = replace(norms, token_rate=start, by_family=by_family)
    # Equal normalizers keep their object: the projection cache is keyed on its identity.
    if cached is not None and cached[1] == norms and cached[1].by_family == norms.by_family:
        norms = cached[1]
    costs.derived["normalizers"] = (key, norms)
    return norms


def _scaled(p: Prices, scale: float) -> Prices:
    return Prices(p.prefill_token * scale, p.output_token * scale, p.delivery * scale)


@dataclass(slots=True)
class _Row:
    """One request's projection through the queued frames, and its last view."""

    request: RequestState
    key: tuple
    price: Prices | None  # unscaled; None when a queued frame blocks the request
    advance: int
    last_output_ns: int
    sigma_ms: float | None
    awaits_prerequisite: bool
    view: LaneView | None = None
    view_scale: float = 0.0


class ProjectionCache:
    """Per-request projections reused while their inputs are unchanged.

    A row depends on the request (its epoch, which every commit, completion,
    cancellation and retirement bumps, and, because callers may adjust them between
    decisions, its stored rates, last output, positions and spec), on the queued frames,
    the normalizers, the policy and the depth; the last four are checked once per
    decision and any change drops every row. A view is reused only when the decision's
    scale and the request's age are also unchanged, so a cached view is always the one
    a fresh projection would build.
    """

    def __init__(self) -> None:
        self.rows: dict[int, _Row] = {}  # by id(request); a row holds its request
        self.context: tuple = ()

    def prepare(self, context: tuple) -> None:
        """Drop every row unless ``context`` holds the same objects as the last one."""
        old = self.context
        if len(old) != len(context) or any(a is not b for a, b in zip(old, context, strict=True)):
            self.rows.clear()
            self.context = context


def _request_key(r: RequestState) -> tuple:
    rates = r.rates
    return (
        r.epoch,
        rates.token_rate,
        rates.delivery_rate,
        r.last_output_ns,
        r.prompt_position,
        r.num_output,
        r.last_served_seq,
        r.spec,
        r.is_restored,
        r.is_vision_ready,
        r.is_initialized,
        len(r.captured),
    )


def _project(r: RequestState, key: tuple, frames: list, norms: Normalizers, policy) -> _Row:
    """The request's rates and limits as if every queued frame completed as expected."""
    advance, last_output, blocked = 0, r.last_output_ns, False
    is_decoder = r.is_decoder
    slot, generation = r.handle.slot, r.handle.generation
    steps = []
    for frame, duration_ms, expected_end_ns, a in frames:
        lane = frame.lanes_by_slot.get(slot)
        if lane is not None and lane.handle.generation != generation:
            lane = None
        if lane is not None:
            advance += lane.max_advance_tokens
            blocked |= lane.role is not LaneRole.DECODE or not is_decoder
            if lane.expected_deliveries > 0:
                last_output = expected_end_ns
        if duration_ms > 0 and frame.participant_generations.get(slot) == generation:
            if lane is None:
                steps.append((a, duration_ms, 0.0, 0.0))
            else:
                tokens = lane.num_prompt_tokens + lane.expected_output_tokens
                steps.append((a, duration_ms, tokens, lane.expected_deliveries))
    price = None if blocked else projected_prices(r.rates, steps, norms, policy, is_decoder)
    return _Row(r, key, price, advance, last_output, norms.sigma_ms, r.awaits_prerequisite)


def _view(r: RequestState, row: _Row, scale: float, age_ms: float, max_depth: int) -> LaneView:
    """The request's LaneView; RequestState's position properties are inlined (one view
    per request per decision, so each property call shows)."""
    spec = r.spec
    position, num_output = r.prompt_position, r.num_output
    return LaneView(
        r.handle,
        r.epoch,
        position >= spec.num_prompt_tokens,
        max(position, spec.restore_tokens),
        spec.num_prompt_tokens,
        spec.max_output_tokens - num_output - row.advance,  # remaining_output - advance
        spec.context_capacity - (position + num_output) - row.advance,  # remaining_context
        _scaled(row.price, scale),
        age_ms,
        r.last_served_seq,
        row.sigma_ms,
        r.acceptance.history(spec.proposal_source).survivals(max_depth),
        r.forecast.means(max_depth),
        spec.message_endpoints,
        spec.image_spans,
        spec.capture_ends,
        spec.vision_patches if r.needs_vision else 0,
        spec.vision_patches if (r.needs_restore or r.needs_init) and not r.is_vision_ready else 0,
    )


def build_population(
    requests: Mapping[RequestHandle, RequestState],
    queue: ExecutionQueue,
    descriptors: Sequence[Descriptor],
    costs: CostModel,
    policy: PolicyConfig,
    start_ns: int,
    max_depth: int,
    cache: ProjectionCache | None = None,
) -> tuple[Population, Decision]:
    """``cache`` (the scheduler's) keeps unchanged requests' rows between decisions;
    without one every row is projected afresh, by the same code."""
    norms = current_normalizers(descriptors, costs, requests.values())
    frames = []
    for frame in queue.frames:
        duration_ms = frame.plan.estimated_duration_ns / 1e6
        a = decay(duration_ms, policy.adaptation_ms) if duration_ms > 0 else 0.0
        frames.append((frame, duration_ms, frame.expected_end_ns, a))
    if cache is None:
        cache = ProjectionCache()
    cache.prepare((*queue.frames, norms, policy, max_depth))
    cached = cache.rows
    live = [r for r in requests.values() if r.is_live]
    families: dict[str, Normalizers] = {}
    rows = []
    for r in live:
        if r.is_window_held:
            continue  # waits for its next window's generation (helios/vision_windows.py)
        key = _request_key(r)
        row = cached.get(id(r))
        if row is None or row.request is not r or row.key != key:
            source = r.spec.proposal_source
            family_norms = families.get(source)
            if family_norms is None:
                family_norms = families[source] = norms.for_family(stream_family(source))
            row = cached[id(r)] = _project(r, key, frames, family_norms, policy)
        if row.price is not None:
            rows.append((r, row))
    if len(cached) > 2 * len(live) + 16:
        current = {id(r) for r in live}
        for ident in [i for i in cached if i not in current]:
            del cached[ident]
    largest = max([1.0, *(row.price.largest for _, row in rows)])
    scale = 1.0 / largest
    prompts, decoders, pending = [], [], []
    for r, row in rows:
        last_output = row.last_output_ns
        age_ms = max(0.0, (start_ns - last_output) / 1e6) if last_output >= 0 else 0.0
        view = row.view
        if view is None or row.view_scale != scale or view.age_ms != age_ms:
            view = row.view = _view(r, row, scale, age_ms, max_depth)
            row.view_scale = scale
        if row.awaits_prerequisite:
            pending.append(view)  # its view is what the prerequisite would enable
        else:
            (decoders if view.is_decoder else prompts).append(view)
    terminal = tuple(
        TerminalView(
            handle=r.handle,
            epoch=r.epoch,
            age_ms=max(0.0, (start_ns - r.terminal_since_ns) / 1e6),
            checkpoint_tokens=max(0, r.context_tokens - 1),
            last_served_seq=r.last_served_seq,
        )
        for r in requests.values()
        if r.is_terminal_pending
    )
    decision = Decision(
        age_price=policy.decode_age_price * scale,
        num_active_decoders=sum(1 for r in live if r.is_decoder),
        alpha=policy.adaptive_verification_alpha,
        log_scale=math.log(scale),
        terminal_age_price=policy.terminal_age_price * scale,
        num_terminal=len(terminal),
    )
    population = Population(tuple(prompts), tuple(decoders), tuple(pending), terminal)
    return population, decision

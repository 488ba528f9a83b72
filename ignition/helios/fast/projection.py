"""The population plan() builds: ``decide.projection.build_population``'s views, made
fast."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ignition.components.descriptor import Descriptor
from ignition.helios.config import PolicyConfig
from ignition.helios.decide import cadence_ramp, utility
from ignition.helios.decide.policy import Population
from ignition.helios.decide.projection import measured, row_limit
from ignition.helios.decide.service import (
    Prices,
    _fairness,
    first_delivery_price,
    graph_shares,
    normalizers,
)
from ignition.helios.decide.slot_pressure import pressure_factor
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.fast.normalizer_core import VECTOR_RULES, catalog_arrays, vector_normalizers
from ignition.helios.plans import LaneRole
from ignition.helios.state.cost import CostModel
from ignition.helios.state.prompt_starts import BOUNDED_RULES, prompt_starts
from ignition.helios.state.queue import ExecutionQueue
from ignition.helios.state.rates import Normalizers, decay, stream_family
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import RequestHandle


def current_normalizers(
    descriptors: Sequence[Descriptor],
    costs: CostModel,
    requests: Iterable[ScheduledRequest],
    rule: str,
) -> Normalizers:
    """Normalizers of the measured catalog; the token rate is newcomer ``rule``'s start
    (``PolicyConfig.newcomer_rule``, ``utility.newcomer_token_rate``), used for prices
    and the first service update."""
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
            source = spec.family
            by_source[source] = by_source.get(source, 0) + 1
    families: dict[str, int] = {}
    for source, count in by_source.items():
        family = stream_family(source)
        families[family] = families.get(family, 0) + count
    decoders = sum(families.values())
    # Normalizers read estimates only: an observation that leaves every estimate as it
    # was (the median window absorbed it) changes no normalizer.
    key = (
        id(descriptors),
        costs.estimates_version,
        num_live,
        tuple(sorted(families.items())),
        rule,
    )
    cached = costs.derived.get("normalizers")
    if cached is not None and cached[0] == key:
        return cached[1]
    if rule in VECTOR_RULES:
        arrays = catalog_arrays(descriptors, costs)
        norms = vector_normalizers(arrays, num_live, decoders, families, rule)
    else:
        norms = python_normalizers(measured(descriptors, costs), num_live, decoders, families, rule)
    # Equal normalizers keep their object: the projection cache is keyed on its identity.
    if cached is not None and cached[1] == norms and cached[1].by_family == norms.by_family:
        norms = cached[1]
    costs.derived["normalizers"] = (key, norms)
    return norms


def python_normalizers(
    graphs: list[tuple[Descriptor, float]],
    num_live: int,
    num_decoders: int,
    families: Mapping[str, int],
    rule: str,
) -> Normalizers:
    """``service.normalizers`` with newcomer start ``rule`` (and, for the bounded rules,
    its prompt-bounded table) applied: the reference of ``normalizer_core``."""
    norms = normalizers(graphs, num_live, num_decoders, families)
    start = utility.NEWCOMER_RULES[rule](graphs, num_live)
    if start is None:
        return norms
    starts = None
    if rule in BOUNDED_RULES:
        low = utility.generation_start_rate(graphs, num_live)
        starts = prompt_starts(graph_shares(graphs, num_live), low, start)
    by_family = {
        f: replace(n, token_rate=start, prompt_starts=starts) for f, n in norms.by_family.items()
    }
    return replace(norms, token_rate=start, by_family=by_family, prompt_starts=starts)


def _scaled(p: Prices, scale: float) -> Prices:
    return Prices(p.prefill_token * scale, p.output_token * scale, p.delivery * scale)


@dataclass(slots=True)
class _Row:
    """One request's projection through the queued frames, and its last view."""

    request: ScheduledRequest
    key: tuple
    price: Prices | None  # unscaled; None when a queued frame blocks the request
    advance: int
    last_output_ns: int
    sigma_ms: float | None
    awaits_prerequisite: bool
    view: LaneView | None = None
    view_scale: float = 0.0
    view_factor: float = 1.0  # the slot-pressure factor the view was built under


class ProjectionCache:
    """Per-request projections reused while their inputs are unchanged."""

    def __init__(self) -> None:
        self.rows: dict[int, _Row] = {}  # by id(request); a row holds its request
        self.context: tuple = ()

    def prepare(self, context: tuple) -> None:
        """Drop every row unless ``context`` holds the same objects as the last one."""
        old = self.context
        if len(old) != len(context) or any(a is not b for a, b in zip(old, context, strict=True)):
            self.rows.clear()
            self.context = context


def _project(r: ScheduledRequest, key: tuple, frames: list, norms: Normalizers, policy) -> _Row:
    """The request's rates and limits as if every queued frame completed as expected:
    ``service.advance_rates`` for each queued frame it takes part in, then
    ``service.prices``, the same arithmetic in the same order, inlined (every decision
    after a completion projects every request: the completion moved every participant's
    rates)."""
    advance, last_output, blocked = 0, r.last_output_ns, False
    is_decoder = r.prompt_position >= r.spec.num_prompt_tokens
    slot, generation = r.handle.slot, r.handle.generation
    rates = r.rates
    x, z = rates.token_rate, rates.delivery_rate
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
                tokens, deliveries = 0.0, 0.0
            else:
                tokens = lane.num_prompt_tokens + lane.expected_output_tokens
                deliveries = lane.expected_deliveries
            if x is None:
                x = norms.start_rate(r.spec.uncached_prompt_tokens) or 0.0
            x = a * x + (1 - a) * tokens / duration_ms
            if is_decoder:
                z0 = z if z is not None else (norms.delivery_rate or 0.0)
                z = a * z0 + (1 - a) * deliveries / duration_ms
    price = None
    if not blocked:
        if x is None:
            x = norms.start_rate(r.spec.uncached_prompt_tokens)
        token_term = _fairness(policy.token_fairness, x, norms.token_rate)
        delivery = (
            _fairness(policy.delivery_fairness, z, norms.delivery_rate)
            if is_decoder
            else first_delivery_price(norms, policy)
        )
        price = Prices(1.0 + token_term, policy.beta + token_term, delivery)
    return _Row(r, key, price, advance, last_output, norms.sigma_ms, _awaits_prerequisite(r))


def _awaits_prerequisite(r: ScheduledRequest) -> bool:
    """``ScheduledRequest.awaits_prerequisite`` with its properties inlined."""
    spec = r.spec
    if spec.restore_tokens > 0 and not r.is_restored:
        return True  # needs_restore
    if not r.is_initialized:
        return True  # needs_init
    if spec.vision_patches > 0 and not r.is_vision_ready:
        return True  # needs_vision (a restore would have answered above)
    position = r.prompt_position
    return position in spec.capture_ends and position not in r.captured


def _view(
    row: _Row,
    scale: float,
    age_ms: float,
    max_depth: int,
    factor: float,
    ramped: PolicyConfig | None,
) -> LaneView:
    """The request's LaneView; ScheduledRequest's position properties are inlined (one view
    per request per decision, so each property call shows), except ``remaining_output``,
    read from its one owner."""
    r = row.request
    spec = r.spec
    position, num_output = r.prompt_position, r.num_output
    price = row.price
    # needs_restore or needs_init: the vision prerequisite follows that one
    before_vision = (spec.restore_tokens > 0 and not r.is_restored) or not r.is_initialized
    vision = spec.vision_patches if not r.is_vision_ready else 0
    is_decoder = position >= spec.num_prompt_tokens
    output_price = (price.output_token * factor if is_decoder else price.output_token) * scale
    delivery, sigma_ms = price.delivery * scale, row.sigma_ms
    if is_decoder and ramped is not None:
        ramp = cadence_ramp.ramp(ramped, age_ms)
        delivery *= ramp
        sigma_ms = None if sigma_ms is None else sigma_ms * ramp
    return LaneView(
        r.handle,
        r.epoch,
        is_decoder,
        max(position, spec.restore_tokens),
        spec.num_prompt_tokens,
        r.remaining_output - row.advance,
        spec.context_capacity - (position + num_output) - row.advance,  # remaining_context
        Prices(price.prefill_token * scale, output_price, delivery),
        age_ms,
        r.last_served_seq,
        sigma_ms,
        r.acceptance.history(spec.proposal_source).survivals(max_depth),
        r.forecast.means(max_depth),
        spec.message_endpoints,
        spec.image_spans,
        spec.capture_ends,
        vision if not before_vision else 0,  # needs_vision
        vision if before_vision else 0,  # chained after the restore or init
        row_limit(spec),
    )


def build_population(
    requests: Mapping[RequestHandle, ScheduledRequest],
    queue: ExecutionQueue,
    descriptors: Sequence[Descriptor],
    costs: CostModel,
    policy: PolicyConfig,
    start_ns: int,
    max_depth: int,
    cache: ProjectionCache | None = None,
    waiting_for_slot: int = 0,
) -> tuple[Population, Decision]:
    """``cache`` (the scheduler's) keeps unchanged requests' rows between decisions;
    without one every row is projected afresh, by the same code."""
    norms = current_normalizers(descriptors, costs, requests.values(), policy.newcomer_rule)
    frames = []
    for frame in queue.frames:
        duration_ms = frame.plan.estimated_duration_ns / 1e6
        a = decay(duration_ms, policy.adaptation_ms) if duration_ms > 0 else 0.0
        frames.append((frame, duration_ms, frame.expected_end_ns, a))
    if cache is None:
        cache = ProjectionCache()
    cache.prepare((*queue.frames, norms, policy, max_depth))
    cached = cache.rows
    live = []
    num_decoders = 0
    families: dict[str, Normalizers] = {}
    rows = []
    largest = 1.0
    decoder_output = 0.0  # the largest decoder output-token price (slot pressure scales it)
    for r in requests.values():
        if r.is_finished or r.is_cancelled or r.is_preempted:
            continue  # not live
        live.append(r)
        spec = r.spec
        num_decoders += r.prompt_position >= spec.num_prompt_tokens  # is_decoder, inlined
        stop = spec.window_stop
        if stop and stop in r.captured:
            continue  # waits for its next window's generation (helios/vision_windows.py)
        rates = r.rates
        key = (  # every input of the row: it is rebuilt only when one changes
            r.epoch,
            rates.token_rate,
            rates.delivery_rate,
            r.last_output_ns,
            r.prompt_position,
            r.num_output,
            r.last_served_seq,
            spec,
            r.is_restored,
            r.is_vision_ready,
            r.is_initialized,
            len(r.captured),
        )
        row = cached.get(id(r))
        if row is None or row.request is not r or row.key != key:
            source = spec.family
            family_norms = families.get(source)
            if family_norms is None:
                family_norms = families[source] = norms.for_family(stream_family(source))
            row = cached[id(r)] = _project(r, key, frames, family_norms, policy)
        price = row.price
        if price is not None:
            rows.append(row)
            # Prices.largest, inlined; max() keeps the first of equal values as before
            largest = max(largest, price.prefill_token, price.output_token, price.delivery)
            if r.prompt_position >= spec.num_prompt_tokens:
                decoder_output = max(decoder_output, price.output_token)
    if len(cached) > 2 * len(live) + 16:
        current = {id(r) for r in live}
        for ident in [i for i in cached if i not in current]:
            del cached[ident]
    factor = pressure_factor(policy.slot_pressure, waiting_for_slot, num_decoders)
    # the decoders' pressured prices count toward the scale, as decide/projection's do
    largest = max(largest, decoder_output * factor)
    scale = 1.0 / largest
    prompts, decoders, pending = [], [], []
    ramped = policy if cadence_ramp.is_on(policy) else None
    for row in rows:
        last_output = row.last_output_ns
        age_ms = max(0.0, (start_ns - last_output) / 1e6) if last_output >= 0 else 0.0
        view = row.view
        stale = row.view_scale != scale or row.view_factor != factor
        if view is None or stale or view.age_ms != age_ms:
            view = row.view = _view(row, scale, age_ms, max_depth, factor, ramped)
            row.view_scale, row.view_factor = scale, factor
        if row.awaits_prerequisite:
            pending.append(view)  # its view is what the prerequisite would enable
        elif view.is_decoder:
            decoders.append(view)
        else:
            prompts.append(view)
    terminal = tuple(
        TerminalView(
            handle=r.handle,
            epoch=r.epoch,
            age_ms=max(0.0, (start_ns - r.terminal_since_ns) / 1e6),
            checkpoint_tokens=max(0, r.context_tokens - 1),
            last_served_seq=r.last_served_seq,
        )
        for r in requests.values()
        if r.terminal_since_ns >= 0 and not r.is_cancelled  # is_terminal_pending, inlined
    )
    decision = Decision(
        age_price=policy.decode_age_price * scale,
        num_active_decoders=num_decoders,
        alpha=policy.adaptive_verification_alpha,
        log_scale=math.log(scale),
        terminal_age_price=policy.terminal_age_price * scale,
        num_terminal=len(terminal),
        tbt_target_ms=policy.tbt_target_ms,
        generation_left_out=policy.generation_left_out,
        left_out=policy.left_out,
        prompt_runs=policy.prompt_runs,
        speculation_within_target=policy.speculation_within_target,
        refresh_could_win=policy.refresh_could_win,
        decoder_age_weight=cadence_ramp.age_weight(policy, (*decoders, *pending)),
    )
    population = Population(tuple(prompts), tuple(decoders), tuple(pending), terminal)
    return population, decision

"""Builds one decision's view of the requests, projected to the queue's expected end."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ignition.components.descriptor import Descriptor
from ignition.helios.config import PolicyConfig
from ignition.helios.decide import cadence_ramp, utility
from ignition.helios.decide.policy import Population
from ignition.helios.decide.service import Prices, normalizers, prices, useful_tokens
from ignition.helios.decide.slot_pressure import pressure_factor, pressured
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import Decision, LaneView
from ignition.helios.plans import LaneRole
from ignition.helios.state.cost import CostModel
from ignition.helios.state.prompt_starts import BOUNDED_RULES
from ignition.helios.state.queue import ExecutionQueue
from ignition.helios.state.rates import Normalizers, ServiceRates, advance_rates, stream_family
from ignition.helios.state.requests import ScheduledRequest
from ignition.helios.types import RequestHandle, RequestSpec


def measured(descriptors: Iterable[Descriptor], costs: CostModel) -> list[tuple[Descriptor, float]]:
    """Measured costs (stale ones included) in ms."""
    out = []
    for d in descriptors:
        estimate = costs.estimate_ns(d)
        if estimate > 0:
            out.append((d, estimate / 1e6))
    return out


def row_limit(spec: RequestSpec) -> int:
    """The verification rows one round may give the request: its drafts plus one."""
    return utility.UNLIMITED_ROWS if spec.max_drafts is None else spec.max_drafts + 1


def current_normalizers(
    descriptors: Sequence[Descriptor],
    costs: CostModel,
    requests: Iterable[ScheduledRequest],
    rule: str,
) -> Normalizers:
    live = [r for r in requests if r.is_live]
    families: dict[str, int] = {}
    for r in live:
        if r.is_decoder:
            family = stream_family(r.spec.family)
            families[family] = families.get(family, 0) + 1
    decoders = sum(families.values())
    key = (id(descriptors), costs.version, len(live), tuple(sorted(families.items())), rule)
    # Its own slot: the bounded search keeps its normalizers under another key.
    cached = costs.derived.get("decide_normalizers")
    if cached is not None and cached[0] == key:
        return cached[1]
    graphs = measured(descriptors, costs)
    norms = normalizers(graphs, len(live), decoders, families)
    start = utility.newcomer_token_rate(graphs, len(live), rule)
    if start is not None:
        by_family = {f: replace(n, token_rate=start) for f, n in norms.by_family.items()}
        norms = replace(norms, token_rate=start, by_family=by_family)
    costs.derived["decide_normalizers"] = (key, norms)
    return norms


def newcomer_start(
    graphs: list[tuple[Descriptor, float]],
    num_live: int,
    norms: Normalizers,
    prompt_tokens: int,
    rule: str,
) -> float | None:
    """The start of a request without token history whose uncached prompt is
    ``prompt_tokens`` (ignition/helios/state/prompt_starts.py), by its definition: the
    balanced rule's sqrt(x_gen * x_norm(R)), x_norm(R) the best min(useful / k, R) / T
    over the measured graphs; a prompt at least the best graph's share keeps the start."""
    start = norms.token_rate
    if start is None or rule not in BOUNDED_RULES:
        return start
    k = max(1, num_live)
    low = utility.generation_start_rate(graphs, k)
    shares = [
        (useful_tokens(d, min(d.batch_capacity, k)) / k, t_ms) for d, t_ms in graphs if t_ms > 0
    ]
    shares = [(s, t) for s, t in shares if s > 0]
    if low is None or not shares:
        return start
    best = max(shares, key=lambda st: (st[0] / st[1], -st[0]))
    if prompt_tokens >= best[0]:
        return start
    absorbable = max(min(s, prompt_tokens) / t for s, t in shares)
    return min(start, math.sqrt(low * absorbable))


def _scaled(p: Prices, scale: float) -> Prices:
    return Prices(p.prefill_token * scale, p.output_token * scale, p.delivery * scale)


def build_population(
    requests: Mapping[RequestHandle, ScheduledRequest],
    queue: ExecutionQueue,
    descriptors: Sequence[Descriptor],
    costs: CostModel,
    policy: PolicyConfig,
    start_ns: int,
    max_depth: int,
    waiting_for_slot: int = 0,
) -> tuple[Population, Decision]:
    norms = current_normalizers(descriptors, costs, requests.values(), policy.newcomer_rule)
    live = [r for r in requests.values() if r.is_live]
    graphs = measured(descriptors, costs)
    rows = []
    for r in live:
        if r.is_window_held:  # held at its vision window's boundary (vision_windows.py)
            continue
        family_norms = norms.for_family(stream_family(r.spec.family))
        token_rate = r.rates.token_rate
        if token_rate is None:  # a newcomer: the start bounded by its prompt
            token_rate = newcomer_start(
                graphs, len(live), family_norms, r.spec.uncached_prompt_tokens, policy.newcomer_rule
            )
        rates = ServiceRates(token_rate, r.rates.delivery_rate)
        advance, last_output, blocked = 0, r.last_output_ns, False
        for frame in queue.frames:
            lane = frame.plan.lane_of(r.handle)
            if lane is not None:
                advance += lane.max_advance_tokens
                blocked |= lane.role is not LaneRole.DECODE or not r.is_decoder
                if lane.expected_deliveries > 0:
                    last_output = frame.expected_end_ns
            duration_ms = frame.plan.estimated_duration_ns / 1e6
            if duration_ms > 0 and any(p.handle == r.handle for p in frame.participants):
                tokens = (
                    0.0 if lane is None else lane.num_prompt_tokens + lane.expected_output_tokens
                )
                rates = advance_rates(
                    rates,
                    duration_ms=duration_ms,
                    tokens=tokens,
                    deliveries=0.0 if lane is None else lane.expected_deliveries,
                    norms=family_norms,
                    is_decoder=r.is_decoder,
                    adaptation_ms=policy.adaptation_ms,
                )
        if blocked:
            continue
        rows.append((r, rates, advance, last_output, family_norms))
    factor = pressure_factor(
        policy.slot_pressure, waiting_for_slot, sum(1 for r in live if r.is_decoder)
    )
    raw = [
        pressured(prices(rates, fn, policy, r.is_decoder), factor if r.is_decoder else 1.0)
        for r, rates, _, _, fn in rows
    ]
    largest = max([1.0, *(p.largest for p in raw)])
    scale = 1.0 / largest
    prompts, decoders, pending = [], [], []
    for (r, _, advance, last_output, fn), p in zip(rows, raw, strict=True):
        age_ms = max(0.0, (start_ns - last_output) / 1e6) if last_output >= 0 else 0.0
        source = r.spec.proposal_source
        scaled, sigma_ms = _scaled(p, scale), fn.sigma_ms
        if r.is_decoder and cadence_ramp.is_on(policy):  # decide/cadence_ramp.py
            ramp = cadence_ramp.ramp(policy, age_ms)
            scaled = Prices(scaled.prefill_token, scaled.output_token, scaled.delivery * ramp)
            sigma_ms = None if sigma_ms is None else sigma_ms * ramp
        view = LaneView(
            handle=r.handle,
            epoch=r.epoch,
            is_decoder=r.is_decoder,
            prompt_position=max(r.prompt_position, r.spec.restore_tokens),
            num_prompt_tokens=r.spec.num_prompt_tokens,
            remaining_output=r.remaining_output - advance,
            remaining_context=r.remaining_context - advance,
            prices=scaled,
            age_ms=age_ms,
            last_served_seq=r.last_served_seq,
            sigma_ms=sigma_ms,
            survivals=r.acceptance.history(source).survivals(max_depth),
            forecast=r.forecast.means(max_depth),
            message_endpoints=r.spec.message_endpoints,
            image_spans=r.spec.image_spans,
            capture_ends=r.spec.capture_ends,
            max_rows=row_limit(r.spec),
            vision_patches=r.spec.vision_patches if r.needs_vision else 0,
            chained_patches=(  # restore or init -> vision -> inference
                r.spec.vision_patches
                if (r.needs_restore or r.needs_init) and not r.is_vision_ready
                else 0
            ),
        )
        if r.awaits_prerequisite:
            pending.append(view)  # its view is what the prerequisite would enable
        else:
            (decoders if r.is_decoder else prompts).append(view)
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

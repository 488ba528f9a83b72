"""What a state operation's rows are worth: which prerequisite a waiting request needs,
the prompt and decoder values it enables in a following graph (decoders at that graph's
width, ``following_rows``), and the lane picks a state candidate carries."""

from __future__ import annotations

from collections.abc import Sequence

from ignition.components.descriptor import Descriptor
from ignition.components.program_kinds import GraphKind
from ignition.helios.decide.terminal import TerminalView
from ignition.helios.decide.utility import (
    Decision,
    LanePick,
    LaneView,
    consumable_tokens,
    decode_lane,
    prompt_capacity,
)
from ignition.helios.plans import LaneRole
from ignition.helios.state.acceptance import expected_output
from ignition.helios.state.cost import CostModel

STATE_KINDS = (GraphKind.INIT, GraphKind.RESTORE, GraphKind.SNAPSHOT, GraphKind.VISION)
ROLES = {
    GraphKind.INIT: LaneRole.INIT,
    GraphKind.RESTORE: LaneRole.RESTORE,
    GraphKind.SNAPSHOT: LaneRole.SNAPSHOT,
    GraphKind.VISION: LaneRole.VISION,
}


def _ms(costs: CostModel, d: Descriptor) -> float | None:
    estimate = costs.estimate_ns(d)
    return estimate / 1e6 if estimate > 0 else None


def terminal_sigma_ms(
    snapshots: Sequence[Descriptor], costs: CostModel, num_terminal: int
) -> float | None:
    """K * T / min(B, K) for the measured snapshot shape minimizing T / min(B, K)."""
    if num_terminal < 1:
        return None
    best = None
    for d in snapshots:
        t = _ms(costs, d)
        if t is not None:
            per = t / min(d.batch_capacity, num_terminal)
            best = per if best is None else min(best, per)
    return None if best is None else num_terminal * best


def _enabled_kind(view: LaneView) -> GraphKind:
    """Vision-pending views carry their patches; restore-pending ones sit at the restored
    position, capture-pending ones at the capture end, init-pending ones at position zero
    (a capture never ends there, a restore never restores nothing; see projection)."""
    if view.vision_patches:
        return GraphKind.VISION
    if view.prompt_position in view.capture_ends:
        return GraphKind.SNAPSHOT
    return GraphKind.RESTORE if view.prompt_position > 0 else GraphKind.INIT


def _enables(view: LaneView, d: Descriptor) -> bool:
    """Whether ``d`` performs the prerequisite ``view`` waits for (a vision program must
    hold the window's largest image)."""
    if _enabled_kind(view) is not d.kind:
        return False
    return d.kind is not GraphKind.VISION or view.vision_patches <= d.patch_capacity


def _prompt_value(view: LaneView, d: Descriptor) -> tuple[float, int]:
    tokens = consumable_tokens(view, prompt_capacity(d))
    value = view.prices.prefill_token * tokens
    if tokens > 0 and tokens >= view.remaining_prompt:
        value += view.prices.output_token + view.prices.delivery
    return value, tokens


def following_rows(d: Descriptor) -> int:
    """Rows a decoder can verify in following graph ``d`` whichever cohort it joins:
    min(D + 1, W), and no more than an even share P // B of the row budget, which every
    cohort of at most B lanes can give each lane (exact for rectangular programs, a lower
    bound for ragged ones)."""
    if not d.speculation_enabled:
        return 1
    share = d.packed_capacity // d.batch_capacity
    return max(1, min(d.verify_rows, share))


def decoder_rows(view: LaneView, rows: int) -> int:
    """``rows`` bounded by the request's own limits (output, context, drafts)."""
    return max(1, min(rows, view.remaining_output, view.remaining_context, view.max_rows))


def _decoder_value(view: LaneView, decision: Decision, total_ms: float, rows: int = 1) -> float:
    """A decoder's following-graph value at ``rows`` verified rows (following_rows)."""
    if view.remaining_output < 1:
        return 0.0
    q = decoder_rows(view, rows)
    output = expected_output(view.survivals, q, decision.alpha)
    return decode_lane(view, decision, total_ms, q, output, q).value


def _state_lane(view: LaneView, role: LaneRole) -> LanePick:
    return LanePick(view=view, role=role, query_length=0, value=0.0)


def _terminal_pick(row: TerminalView) -> LanePick:
    view = LaneView(
        handle=row.handle,  # type: ignore[arg-type]
        epoch=row.epoch,
        is_decoder=True,
        prompt_position=0,
        num_prompt_tokens=0,
        remaining_output=0,
        remaining_context=0,
        prices=None,  # type: ignore[arg-type]
        age_ms=row.age_ms,
        last_served_seq=row.last_served_seq,
    )
    return LanePick(view=view, role=LaneRole.TERMINAL, query_length=0, value=0.0)

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ignition.kernels.speculative_allocation.reference import allocate_speculative_prefixes


def greedy_frontier(draft_probs, ceilings, packed_capacity):
    """Brute force: admit the best frontier one row at a time, ties to shorter then lower lane."""
    num_lanes = len(ceilings)
    lengths = [1 if c > 0 else 0 for c in ceilings]
    budget = packed_capacity - sum(lengths)
    while budget > 0:
        best = None
        for r in range(num_lanes):
            length = lengths[r]
            if 0 < length < ceilings[r]:
                value = float(torch.cumprod(draft_probs[r], dim=0)[length - 1])
                key = (-value, length, r)
                best = key if best is None or key < best else best
        if best is None:
            break
        lengths[best[2]] += 1
        budget -= 1
    return lengths


@st.composite
def allocation_problems(draw):
    """Lanes, depth, ceilings and capacity; probabilities from a few values to force ties."""
    num_lanes = draw(st.integers(1, 6))
    depth = draw(st.integers(0, 5))
    values = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(0.0, 1.0, width=32)
    probs = draw(st.lists(values, min_size=num_lanes * depth, max_size=num_lanes * depth))
    ceilings = draw(st.lists(st.integers(0, depth + 1), min_size=num_lanes, max_size=num_lanes))
    capacity = draw(st.integers(num_lanes, num_lanes * (depth + 1) + 1))
    return torch.tensor(probs).reshape(num_lanes, depth), ceilings, capacity


@settings(max_examples=150, deadline=None, derandomize=True)
@given(allocation_problems())
def test_matches_the_greedy_causal_frontier(problem):
    probs, ceilings, capacity = problem
    query_lens, _ = allocate_speculative_prefixes(
        probs, torch.tensor(ceilings, dtype=torch.int32), capacity
    )
    assert query_lens.tolist() == greedy_frontier(probs, ceilings, capacity)
    assert int(query_lens.sum()) <= capacity


def test_ties_go_to_the_shorter_prefix_then_the_lower_lane():
    probs = torch.tensor([[1.0, 0.5, 0.5], [0.5, 1.0, 1.0], [0.5, 1.0, 1.0]])
    ceilings = torch.tensor([4, 4, 4], dtype=torch.int32)
    # Frontier values: lane 0 -> 1.0 then 0.5; lanes 1, 2 -> 0.5. After lane 0's first draft
    # all three frontiers are worth 0.5; lane 0 is at length 2 so the shorter lanes 1, 2 win.
    query_lens, _ = allocate_speculative_prefixes(probs, ceilings, 5)
    assert query_lens.tolist() == [2, 2, 1]


def test_every_active_lane_keeps_its_pending_token_and_inactive_lanes_get_nothing():
    probs = torch.full((3, 2), 0.9)
    query_lens, _ = allocate_speculative_prefixes(
        probs, torch.tensor([0, 3, 1], dtype=torch.int32), 3
    )
    assert query_lens.tolist() == [0, 2, 1]


def test_confidence_sidecar_holds_draft_and_joint_prefix_probabilities():
    probs = torch.tensor([[0.5, 0.4, 1.0], [0.9, 0.9, 0.9]])
    _, confidence = allocate_speculative_prefixes(probs, torch.tensor([4, 0], dtype=torch.int32), 2)
    assert confidence.shape == (2, 2, 3) and confidence.dtype == torch.float32
    torch.testing.assert_close(confidence[0, 0], probs[0])
    torch.testing.assert_close(confidence[1, 0], torch.tensor([0.5, 0.2, 0.2]))
    assert torch.equal(confidence[:, 1], torch.zeros(2, 3))


def test_capacity_below_the_lane_count_is_rejected():
    with pytest.raises(ValueError, match="packed_capacity 1 is below the 2 lanes"):
        allocate_speculative_prefixes(torch.ones(2, 2), torch.ones(2, dtype=torch.int32), 1)

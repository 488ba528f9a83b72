from __future__ import annotations

import pytest
import torch

from ignition.kernels.rejection_verify import reference as verify_reference
from ignition.kernels.speculative_allocation import reference as allocation_reference
from tests.kernels.kernel_tolerances import CONFIDENCE, EXACT, nan_like

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("num_lanes", "depth", "seed"),
    [(1, 1, 0), (3, 5, 1), (7, 3, 2), (17, 5, 3), (4, 4, 4), (2, 0, 5)],
)
def test_allocation_matches_reference(num_lanes, depth, seed, device):
    from ignition.kernels.speculative_allocation import triton

    gen = torch.Generator().manual_seed(seed)
    probs = torch.rand(num_lanes, depth, generator=gen)
    if seed == 4:  # powers of two: exact ties between lanes and prefixes
        probs = torch.tensor(
            [[1.0, 0.5, 0.5, 0.5], [0.5, 1, 1, 1], [0.5, 1, 1, 1], [0.25, 1, 1, 1]]
        )
    ceilings = torch.randint(0, depth + 2, (num_lanes,), generator=gen, dtype=torch.int32)
    capacity = int(torch.randint(num_lanes, num_lanes * (depth + 1) + 1, (1,), generator=gen))
    probs, ceilings = probs.to(device), ceilings.to(device)
    query_lens = nan_like(ceilings)
    confidence = nan_like(probs, 2, num_lanes, depth)
    triton.launch_allocate_speculative_prefixes(probs, ceilings, capacity, query_lens, confidence)
    expected_lens, expected_confidence = allocation_reference.allocate_speculative_prefixes(
        probs, ceilings, capacity
    )
    torch.testing.assert_close(query_lens, expected_lens, **EXACT)
    torch.testing.assert_close(confidence, expected_confidence, **CONFIDENCE)


def verify_case(num_rows, depth, width, vocab, seed, device):
    """Drafts copy the target argmax 70% of the time so that rows accept a few positions."""
    gen = torch.Generator().manual_seed(seed)
    target = torch.softmax(torch.randn(num_rows, width, vocab, generator=gen) * 3, -1)
    draft = torch.softmax(torch.randn(num_rows, depth, vocab, generator=gen) * 3, -1)
    argmax = target.argmax(-1).repeat(1, max(depth, 1))[:, :depth]
    random_tokens = torch.randint(0, vocab, (num_rows, depth), generator=gen)
    tokens = torch.where(torch.rand(num_rows, depth, generator=gen) < 0.7, argmax, random_tokens)
    max_len = min(depth + 1, width)
    query_lens = torch.randint(0, max_len + 1, (num_rows,), generator=gen, dtype=torch.int32)
    query_lens[0] = max_len
    uniforms = torch.rand(num_rows, width, generator=gen)
    noise = torch.empty(num_rows, vocab).exponential_(generator=gen)
    return [t.to(device) for t in (tokens, draft, target, query_lens, uniforms, noise)]


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
@pytest.mark.parametrize(
    ("num_rows", "depth", "width", "vocab"),
    [(3, 0, 1, 7), (1, 1, 2, 7), (4, 3, 4, 37), (5, 5, 3, 50), (6, 2, 4, 2000)],
    ids=["width-one", "single-draft", "w-equals-d-plus-1", "w-below-d", "vocab-spans-blocks"],
)
def test_rejection_verify_matches_reference(num_rows, depth, width, vocab, greedy, device):
    from ignition.kernels.rejection_verify import triton

    inputs = verify_case(num_rows, depth, width, vocab, seed=vocab, device=device)
    num_accepted = nan_like(inputs[3], num_rows)
    output_tokens = nan_like(inputs[0], num_rows, width)
    survival = nan_like(inputs[1], num_rows, depth)
    triton.launch_rejection_verify(*inputs, greedy, num_accepted, output_tokens, survival)
    expected = verify_reference.rejection_verify(*inputs, greedy)
    torch.testing.assert_close(num_accepted, expected[0], **EXACT)
    torch.testing.assert_close(output_tokens, expected[1], **EXACT)
    torch.testing.assert_close(survival, expected[2], **EXACT)

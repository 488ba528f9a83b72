"""Coupled verification (issue 24, defect 2): speculation never changes the tokens.

A draft is kept when it equals the token ordinary sampling emits at its position (the
exponential race over the same per-position noise), and the first disagreement emits that
token, so every emitted token is the one speculation off would have emitted.
"""

from __future__ import annotations

import pytest
import torch

from ignition.model.coupled_verify import (
    coupled_verify,
    draft_stream,
    position_samples,
    use_verification,
    verification_mode,
)
from ignition.model.sampling import RandomStream, SamplingTensors, sample

VOCAB = 32


def random_probs(*shape: int, seed: int = 0) -> torch.Tensor:
    logits = torch.randn(*shape, VOCAB, generator=torch.Generator().manual_seed(seed)) * 2
    return torch.softmax(logits, -1)


def test_a_position_sample_is_what_ordinary_sampling_draws_there():
    probs = random_probs(3, 4)
    seed, start = torch.tensor([7, 8, 9]), torch.tensor([10, 0, 33])
    samples = position_samples(probs, seed, start)
    for r in range(3):
        for j in range(4):
            row = SamplingTensors.build([1.0], seed=[int(seed[r])])
            expected = sample(probs[r, j].log()[None], row, start[r : r + 1] + j + 1)
            assert samples[r, j] == expected[0], (r, j)


def test_drafts_are_kept_while_they_equal_the_targets_samples():
    draft_tokens = torch.tensor([[3, 4, 5], [3, 4, 5], [3, 4, 5], [3, 4, 5]])
    target_tokens = torch.tensor([[3, 4, 9, 1], [3, 4, 5, 1], [8, 4, 5, 1], [3, 4, 5, 1]])
    query_lens = torch.tensor([4, 4, 4, 2], dtype=torch.int32)
    probs = random_probs(4, 4)
    dists = random_probs(4, 3, seed=1)
    accepted, output, survival = coupled_verify(
        draft_tokens, dists, probs, target_tokens, query_lens
    )
    assert accepted.tolist() == [2, 3, 0, 1]
    assert output.tolist() == [
        [3, 4, 9, -1],  # third draft differs: the target's own token replaces it
        [3, 4, 5, 1],  # every draft kept: the bonus is the target's sample after them
        [8, -1, -1, -1],
        [3, 4, -1, -1],  # one draft offered (query length 2)
    ]
    assert survival.shape == (4, 3)
    assert (survival[3, 1:] == 0).all()  # nothing offered there


def test_an_inactive_row_emits_nothing():
    accepted, output, _ = coupled_verify(
        torch.tensor([[1, 2]]), random_probs(1, 2), random_probs(1, 3),
        torch.tensor([[1, 2, 3]]), torch.tensor([0], dtype=torch.int32),
    )  # fmt: skip
    assert accepted.tolist() == [0]
    assert output.tolist() == [[-1, -1, -1]]


def test_coupled_is_the_default_and_drafts_share_the_targets_noise():
    assert verification_mode() == "coupled"
    assert draft_stream() == RandomStream.SAMPLE
    with use_verification("rejection"):
        assert draft_stream() == RandomStream.DRAFT
    with pytest.raises(ValueError, match="unknown verification mode 'maybe'"):
        use_verification("maybe").__enter__()

"""Issue 15: the prompt-logprobs scoring stage reduces [N, vocab] logits chunk by chunk."""

from __future__ import annotations

import torch

from ignition.model.prompt_logprobs import score_positions


def test_scoring_in_chunks_equals_one_log_softmax_over_every_position():
    generator = torch.Generator().manual_seed(2)
    head = torch.randn(300, 16, generator=generator)
    hidden = torch.randn(10, 16, generator=generator)
    targets = torch.randint(0, 300, (10,), generator=generator)
    scores = score_positions(lambda h: h @ head.T, hidden, targets, num_top=4, chunk=3)
    logprobs = torch.log_softmax(hidden @ head.T, dim=-1)
    chosen = logprobs[torch.arange(10), targets]
    torch.testing.assert_close(scores.logprob, chosen)
    assert scores.rank.tolist() == [
        int((row >= c).sum()) for row, c in zip(logprobs, chosen, strict=True)
    ]
    top = logprobs.topk(4, dim=-1)
    assert torch.equal(scores.top_ids, top.indices)
    torch.testing.assert_close(scores.top_logprobs, top.values)


def test_the_most_likely_token_has_rank_one_and_no_positions_score_nothing():
    hidden = torch.eye(3)
    scores = score_positions(lambda h: h * 5, hidden, torch.tensor([0, 1, 0]), num_top=2)
    assert scores.rank.tolist() == [1, 1, 3]  # ties count: all three logits are 0
    empty = score_positions(lambda h: h, hidden[:0], torch.zeros(0, dtype=torch.long), 2)
    assert empty.logprob.shape == (0,) and empty.top_ids.shape == (0, 2)

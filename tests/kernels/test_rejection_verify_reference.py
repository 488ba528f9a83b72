from __future__ import annotations

import pytest
import torch

from ignition.kernels.rejection_verify.reference import rejection_verify

VOCAB = 5


def one_hot_probs(tokens: list[int], vocab: int = VOCAB) -> torch.Tensor:
    """[len, vocab] distributions peaked (0.6) on the given tokens."""
    probs = torch.full((len(tokens), vocab), 0.1)
    probs[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0 - 0.1 * (vocab - 1)
    return probs


def greedy_case():
    """Two rows, D = 3, W = 4: row 0 matches twice then mismatches, row 1 matches everything."""
    target = torch.stack([one_hot_probs([1, 2, 3, 4]), one_hot_probs([0, 0, 0, 2])])
    draft_tokens = torch.tensor([[1, 2, 0], [0, 0, 0]])
    draft_probs = torch.full((2, 3, VOCAB), 1.0 / VOCAB)
    return draft_tokens, draft_probs, target


def test_greedy_accepts_matching_drafts_then_emits_the_target_argmax():
    draft_tokens, draft_probs, target = greedy_case()
    query_lens = torch.tensor([4, 4], dtype=torch.int32)
    num_accepted, output, _ = rejection_verify(
        draft_tokens, draft_probs, target, query_lens,
        torch.rand(2, 4), torch.ones(2, VOCAB), greedy=True,
    )  # fmt: skip
    assert num_accepted.tolist() == [2, 3]
    assert output.tolist() == [[1, 2, 3, -1], [0, 0, 0, 2]]


def test_greedy_never_accepts_drafts_beyond_the_offered_ones():
    draft_tokens, draft_probs, target = greedy_case()
    query_lens = torch.tensor([1, 2], dtype=torch.int32)
    num_accepted, output, survival = rejection_verify(
        draft_tokens, draft_probs, target, query_lens,
        torch.rand(2, 4), torch.ones(2, VOCAB), greedy=True,
    )  # fmt: skip
    assert num_accepted.tolist() == [0, 1]
    assert output.tolist() == [[1, -1, -1, -1], [0, 0, -1, -1]]
    assert torch.equal(survival[0], torch.zeros(3))
    assert torch.equal(survival[1, 1:], torch.zeros(2))


def test_inactive_rows_accept_nothing_and_emit_nothing():
    draft_tokens, draft_probs, target = greedy_case()
    query_lens = torch.tensor([0, 4], dtype=torch.int32)
    for greedy in (True, False):
        num_accepted, output, survival = rejection_verify(
            draft_tokens, draft_probs, target, query_lens,
            torch.rand(2, 4), torch.ones(2, VOCAB), greedy=greedy,
        )  # fmt: skip
        assert num_accepted[0] == 0
        assert output[0].tolist() == [-1, -1, -1, -1]
        assert torch.equal(survival[0], torch.zeros(3))


def test_survival_is_the_cumulative_product_of_capped_probability_ratios():
    draft_tokens = torch.tensor([[1, 2]])
    draft_probs = torch.tensor([[[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]])
    target = torch.tensor([[[0.2, 0.25, 0.55], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
    _, _, survival = rejection_verify(
        draft_tokens, draft_probs, target, torch.tensor([3], dtype=torch.int32),
        torch.zeros(1, 3), torch.ones(1, 3), greedy=False,
    )  # fmt: skip
    torch.testing.assert_close(survival, torch.tensor([[0.5, 0.5]]))


def total_variation(samples: torch.Tensor, probs: torch.Tensor) -> float:
    counts = torch.bincount(samples, minlength=probs.numel()).float()
    return 0.5 * float((counts / counts.sum() - probs).abs().sum())


def test_sampled_acceptance_preserves_the_target_distribution():
    gen = torch.Generator().manual_seed(0)
    num_rows, depth = 40_000, 2
    target_rows = torch.tensor([[0.5, 0.2, 0.1, 0.15, 0.05], [0.1, 0.1, 0.3, 0.3, 0.2], [0.2] * 5])
    draft_rows = torch.tensor([[0.1, 0.4, 0.3, 0.1, 0.1], [0.3, 0.3, 0.1, 0.1, 0.2]])
    draft_tokens = torch.multinomial(draft_rows, num_rows, replacement=True, generator=gen).t()
    num_accepted, output, _ = rejection_verify(
        draft_tokens,
        draft_rows.expand(num_rows, depth, VOCAB),
        target_rows.expand(num_rows, depth + 1, VOCAB),
        torch.full((num_rows,), depth + 1, dtype=torch.int32),
        torch.rand(num_rows, depth + 1, generator=gen),
        torch.empty(num_rows, VOCAB).exponential_(generator=gen),
        greedy=False,
    )
    # Each emitted position is an exact draw from the (context-free) target at that position.
    assert total_variation(output[:, 0], target_rows[0]) < 0.015
    assert total_variation(output[num_accepted >= 1, 1], target_rows[1]) < 0.015
    assert total_variation(output[num_accepted >= 2, 2], target_rows[2]) < 0.03


def test_width_one_rows_without_drafts_sample_the_target_at_position_zero():
    target = torch.tensor([[[0.1, 0.7, 0.2]], [[0.5, 0.25, 0.25]]])
    noise = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.1, 1.0]])  # row 1: token 1 wins the race
    num_accepted, output, survival = rejection_verify(
        torch.zeros(2, 0, dtype=torch.int64), torch.zeros(2, 0, 3), target,
        torch.tensor([1, 1], dtype=torch.int32), torch.rand(2, 1), noise, greedy=False,
    )  # fmt: skip
    assert num_accepted.tolist() == [0, 0]
    assert output.tolist() == [[1], [1]]
    assert survival.shape == (2, 0)


def naive_verify(tokens, draft, target, query_lens, uniforms, noise, greedy):
    """Row by row, draft by draft, as the contract reads; returns plain lists."""
    accepted_counts, outputs, survivals = [], [], []
    num_rows, depth = tokens.shape
    width = target.shape[1]
    for r in range(num_rows):
        n = int(query_lens[r])
        row_out, survival, accepted, alive = [], [0.0] * depth, 0, True
        product = 1.0
        for i in range(max(n - 1, 0)):
            x = int(tokens[r, i])
            p, q = float(target[r, i, x]), float(draft[r, i, x])
            ratio = min(1.0, p / q) if q > 0 else float(p > 0)
            product *= ratio
            survival[i] = product
            ok = int(target[r, i].argmax()) == x if greedy else float(uniforms[r, i]) < ratio
            alive = alive and ok
            if alive:
                accepted += 1
                row_out.append(x)
        if n > 0:
            p = target[r, accepted]
            if greedy:
                final = int(p.argmax())
            elif accepted < n - 1:
                residual = (p - draft[r, accepted]).clamp_min(0)
                final = int(((residual if residual.sum() > 0 else p) / noise[r]).argmax())
            else:
                final = int((p / noise[r]).argmax())
            row_out.append(final)
        accepted_counts.append(accepted)
        outputs.append(row_out + [-1] * (width - len(row_out)))
        survivals.append(survival)
    return accepted_counts, outputs, survivals


@pytest.mark.parametrize("greedy", [True, False], ids=["greedy", "sampled"])
@pytest.mark.parametrize("seed", range(4))
def test_matches_a_naive_row_by_row_verification(seed, greedy):
    gen = torch.Generator().manual_seed(seed)
    num_rows, depth, width, vocab = 6, 3, 4, 6
    target = torch.softmax(torch.randn(num_rows, width, vocab, generator=gen) * 2, -1)
    draft = torch.softmax(torch.randn(num_rows, depth, vocab, generator=gen) * 2, -1)
    copies = target[:, :depth].argmax(-1)
    tokens = torch.where(
        torch.rand(num_rows, depth, generator=gen) < 0.6,
        copies,
        torch.randint(0, vocab, (num_rows, depth), generator=gen),
    )
    query_lens = torch.randint(0, width + 1, (num_rows,), generator=gen, dtype=torch.int32)
    uniforms = torch.rand(num_rows, width, generator=gen)
    noise = torch.empty(num_rows, vocab).exponential_(generator=gen)
    args = (tokens, draft, target, query_lens, uniforms, noise, greedy)
    num_accepted, output, survival = rejection_verify(*args)
    expected_accepted, expected_output, expected_survival = naive_verify(*args)
    assert num_accepted.tolist() == expected_accepted
    assert output.tolist() == expected_output
    torch.testing.assert_close(survival, torch.tensor(expected_survival), rtol=1e-6, atol=1e-7)

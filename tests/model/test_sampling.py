"""Sampling: temperature, top-k, top-p and per-request seeds."""

from __future__ import annotations

import pytest
import torch

from ignition.model import sampling
from ignition.model.sampling import (
    RandomStream,
    SamplingTensors,
    exponential_noise,
    sample,
    seeded_uniform,
    target_distribution,
)

VOCAB = 64


def _logits(num_rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(num_rows, VOCAB, generator=torch.Generator().manual_seed(seed)) * 2


def test_the_same_seed_gives_the_same_tokens():
    logits = _logits(6)
    params = SamplingTensors.build([1.0] * 6, seed=[7] * 6)
    positions = torch.arange(6)
    assert torch.equal(sample(logits, params, positions), sample(logits, params, positions))


def test_a_row_draw_does_not_depend_on_its_batch_neighbours():
    logits = _logits(4)
    params = SamplingTensors.build([0.8] * 4, seed=[1, 2, 3, 4])
    positions = torch.tensor([5, 9, 2, 30])
    together = sample(logits, params, positions)
    alone = sample(logits[2:3], params.rows(torch.tensor([2])), positions[2:3])
    assert together[2] == alone[0]


def test_different_seeds_give_different_token_streams():
    logits = _logits(1).expand(64, -1)
    positions = torch.arange(64)
    first = sample(logits, SamplingTensors.build([1.0] * 64, seed=[1] * 64), positions)
    second = sample(logits, SamplingTensors.build([1.0] * 64, seed=[2] * 64), positions)
    assert not torch.equal(first, second)


def test_temperature_zero_is_argmax():
    logits = _logits(5)
    tokens = sample(logits, SamplingTensors.greedy(5), torch.arange(5))
    assert torch.equal(tokens, logits.argmax(-1))


def test_top_k_keeps_only_the_k_most_likely_tokens():
    logits = _logits(3)
    probs = target_distribution(logits, SamplingTensors.build([1.0] * 3, top_k=[1, 4, 0]))
    assert (probs[0] > 0).sum() == 1 and probs[0].argmax() == logits[0].argmax()
    assert set(probs[1].nonzero().flatten().tolist()) == set(logits[1].topk(4).indices.tolist())
    assert (probs[2] > 0).sum() == VOCAB


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    probs = target_distribution(logits, SamplingTensors.build([1.0], top_p=[0.7]))
    torch.testing.assert_close(probs, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))


def test_sampled_tokens_follow_the_distribution():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]])).expand(4000, -1)
    params = SamplingTensors.build([1.0] * 4000, seed=[11] * 4000)
    tokens = sample(logits, params, torch.arange(4000))
    freq = torch.bincount(tokens, minlength=3).float() / 4000
    assert (freq - torch.tensor([0.6, 0.3, 0.1])).abs().sum() / 2 < 0.03  # total variation


def test_invalid_parameters_are_rejected():
    with pytest.raises(ValueError, match="top_p"):
        SamplingTensors.build([1.0], top_p=[0.0])
    with pytest.raises(ValueError, match="temperature"):
        SamplingTensors.build([-1.0])


def test_greedy_sampling_with_seed_0_at_position_2509_returns_the_argmax():
    """Issue 16: the uniform for token 322 rounded to exactly 1.0 and won the race as NaN."""
    logits = torch.zeros(1, 4096)
    logits[0, 7] = 10.0
    assert sample(logits, SamplingTensors.greedy(1), torch.tensor([2509])).tolist() == [7]


def test_a_top_k_2_sample_never_returns_a_zero_probability_token():
    logits = torch.zeros(1, 4096)
    logits[0, 7], logits[0, 11] = 3.0, 2.5
    params = SamplingTensors.build([1.0], top_k=[2], seed=[0])
    assert sample(logits, params, torch.tensor([2509])).item() in (7, 11)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_every_uniform_lies_strictly_inside_0_1_in_its_dtype_for_every_stream(dtype):
    seeds = torch.tensor([0, 1, 7, 2**40 + 3, 2**63 - 1], dtype=torch.int64).repeat_interleave(100)
    positions = torch.arange(seeds.shape[0]) * 7 + 2509
    for stream in RandomStream:
        u = seeded_uniform(seeds, stream, positions, 1024, dtype)
        assert u.dtype == dtype
        assert bool((u > 0).all()) and bool((u < 1).all()), stream.name
        assert bool((exponential_noise(seeds, stream, positions, 1024) > 0).all())


@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_the_bonus_token_at_seed_0_position_3748_is_the_only_possible_one(backend):
    """Issue 16: the resample noise of token 807 at position 3748 was -0, so p / E was NaN
    there and the reference verifier emitted 807 where the Triton one emitted 7."""
    from ignition.kernels import ops, use_backend

    vocab = 4096
    target = torch.zeros(1, 1, vocab)
    target[0, 0, 7] = 1.0
    seed, position = torch.zeros(1, dtype=torch.int64), torch.tensor([3748])
    noise = exponential_noise(seed, RandomStream.RESAMPLE, position, vocab)
    uniforms = seeded_uniform(seed, RandomStream.ACCEPT, position, 1)
    drafts = torch.zeros(1, 0, dtype=torch.int64)
    with use_backend(backend):
        _, tokens, _ = ops.rejection_verify(
            drafts,
            torch.zeros(1, 0, vocab),
            target,
            torch.ones(1, dtype=torch.int32),
            uniforms,
            noise,
            False,
        )
    assert tokens.tolist() == [[7]]


def _sorted_rule(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """The rule spelled out with a full sort: the smallest prefix reaching top_p, <= top_k."""
    values, order = logits.sort(descending=True)
    probs = torch.softmax(values, -1)
    mass_before = probs.cumsum(-1) - probs
    rank = torch.arange(values.shape[0])
    keep = (rank < (top_k or values.shape[0])) & ((mass_before < top_p) | (rank == 0))
    return order[keep]


@pytest.mark.parametrize(
    ("scale", "top_k", "top_p"),
    [(3.0, 40, 1.0), (3.0, 0, 0.9), (0.05, 0, 0.9), (0.05, 1000, 0.5), (3.0, 300, 0.999)],
)
def test_a_filtered_row_keeps_the_prefix_the_sorted_rule_keeps_inside_or_beyond_the_window(
    scale, top_k, top_p
):
    """Partial sorts where the kept prefix ends inside the candidate window, the full sort
    (flat rows, large top_k) where it does not: the same tokens either way."""
    logits = torch.randn(1, 4096, generator=torch.Generator().manual_seed(3)) * scale
    params = SamplingTensors.build([1.0], top_k=[top_k], top_p=[top_p])
    kept = target_distribution(logits, params)[0].nonzero().flatten()
    assert set(kept.tolist()) == set(_sorted_rule(logits[0], top_k, top_p).tolist())


def test_top_p_1_keeps_every_token():
    """SamplingTensors: top_p 1 = no limit, even where rounding lets the running mass reach 1."""
    logits = torch.randn(4, 4096, generator=torch.Generator().manual_seed(5)) * 4
    probs = target_distribution(logits, SamplingTensors.build([0.7] * 4, top_p=[1.0] * 4))
    assert bool((probs > 0).all())


def _lowbias32(x: int) -> int:
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_uniforms_are_the_lowbias32_hash_of_seed_stream_position_and_index():
    """The module docstring's counter-based hash, computed in plain Python integers."""
    seed, position, stream = 2**63 - 1, 10**12 + 7, RandomStream.RESAMPLE
    u = seeded_uniform(torch.tensor([seed]), stream, torch.tensor([position]), 3000)[0]
    for index in (0, 1, 2047, 2999):
        h = _lowbias32(index + _lowbias32(position * 4 + stream))
        h = _lowbias32(h ^ _lowbias32(seed & 0xFFFFFFFF))
        h = _lowbias32(h ^ _lowbias32(seed >> 32))
        assert u[index].item() == ((h >> 9) + 0.5) / 2**23


def test_cpu_sampling_skipping_unused_paths_matches_running_every_path_bit_for_bit(
    monkeypatch,
):
    """Issue 15: on CPU the sampler skips the paths no row takes and cuts rows beyond the
    window from a wider one; its distributions and tokens are the ones a GPU's fixed-shape
    path (every path over every row) gives. Rows: greedy, plain, top-k inside the window,
    beyond it but inside the wider window, beyond both (a full sort), top-p, min_p."""
    vocab = 20_000
    logits = torch.randn(8, vocab, generator=torch.Generator().manual_seed(11)) * 3
    params = SamplingTensors.build(
        [0.0, 0.9, 1.0, 0.8, 1.2, 0.7, 1.0, 0.6],
        top_k=[0, 0, 40, 1000, 6000, 0, 0, 300],
        top_p=[1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 1.0, 0.95],
        seed=list(range(8)),
        min_p=[0.0] * 6 + [0.05, 0.0],
    )
    positions = torch.arange(8) + 100
    skipping = target_distribution(logits, params), sample(logits, params, positions)
    monkeypatch.setattr(sampling, "SKIP_UNUSED_PATHS", False)
    every_path = target_distribution(logits, params), sample(logits, params, positions)
    assert torch.equal(skipping[0], every_path[0])
    assert torch.equal(skipping[1], every_path[1])
    counts = (skipping[0] > 0).sum(-1).tolist()
    assert counts[0] == 1 and counts[2:5] == [40, 1000, 6000]


def test_an_all_greedy_batch_samples_on_cpu_the_tokens_every_path_gives(monkeypatch):
    """Issue 30: on CPU a batch whose every row is greedy skips the exponential race (its
    noise costs a hash and a log per vocabulary entry); the tokens, the invalid token of
    a row with a NaN logit and the argmax of a row with +inf are those of the race over
    every path."""
    logits = _logits(4)
    logits[1, 7] = float("inf")
    logits[2, 3] = float("nan")
    logits[3] = logits[3].round()  # ties: the first index wins either way
    params = SamplingTensors.build([0.0] * 4, seed=[5, 6, 7, 8])
    positions = torch.arange(4) + 10
    skipping = sample(logits, params, positions)
    monkeypatch.setattr(sampling, "SKIP_UNUSED_PATHS", False)
    every_path = sample(logits, params, positions)
    assert torch.equal(skipping, every_path)
    assert skipping.tolist()[1:3] == [7, sampling.INVALID_TOKEN]


def test_an_all_greedy_batch_on_cpu_is_the_argmax_one_hot():
    logits = _logits(3)
    probs = target_distribution(logits, SamplingTensors.greedy(3))
    assert torch.equal(probs.argmax(-1), logits.argmax(-1)) and bool((probs.sum(-1) == 1).all())


def test_a_row_whose_distribution_is_not_finite_emits_the_invalid_token_alone():
    logits = _logits(3)
    logits[1, 5] = float("inf")  # softmax of +inf is NaN
    logits[2] = float("nan")
    params = SamplingTensors.build([1.0, 1.0, 0.0], seed=[3, 3, 3])
    tokens = sample(logits, params, torch.arange(3))
    clean = sample(logits[:1], params.rows(torch.tensor([0])), torch.arange(1))
    assert tokens.tolist()[1:] == [sampling.INVALID_TOKEN, sampling.INVALID_TOKEN]
    assert tokens[0] == clean[0]


def test_a_row_masked_to_nothing_is_not_a_distribution():
    probs = torch.tensor([[0.0, 0.0], [0.25, 0.75], [float("nan"), 1.0]])
    assert sampling.finite_rows(probs).tolist() == [False, True, False]

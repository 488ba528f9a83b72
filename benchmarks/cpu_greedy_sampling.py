"""CPU cost of sampling an all-greedy batch: the exponential race against the argmax.

Run: PYTHONPATH=. python benchmarks/cpu_greedy_sampling.py [--vocab 32000] [--repeats 3]

``model.sampling.sample`` on CPU takes the argmax when every row is greedy (issue 30);
the race (one-hot distribution, seeded noise over the vocabulary, division, argmax) gives
the same tokens (tests/model/test_sampling.py) at a hash and a log per vocabulary entry.
Both run here in the same process on one thread, fastest of the repeats.
"""

from __future__ import annotations

import argparse
import timeit

import torch

from ignition.model import sampling
from ignition.model.sampling import RandomStream, SamplingTensors


def race(logits: torch.Tensor, params: SamplingTensors, positions: torch.Tensor) -> torch.Tensor:
    """What ``sample`` computed for greedy rows before the shortcut (the GPU's path)."""
    probs = sampling.target_distribution(logits, params)
    noise = sampling.exponential_noise(
        params.seed, RandomStream.SAMPLE, positions, logits.shape[-1]
    )
    tokens = torch.div(probs, noise, out=noise).argmax(-1)
    return torch.where(sampling.finite_rows(probs), tokens, sampling.INVALID_TOKEN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| batch | race us | argmax us | speed-up |")
    print("|---:|---:|---:|---:|")
    for batch in (1, 4, 16):
        logits = torch.randn(batch, args.vocab, generator=torch.Generator().manual_seed(batch))
        params = SamplingTensors.greedy(batch)
        positions = torch.arange(batch)
        fast_tokens = sampling.sample(logits, params, positions)
        assert torch.equal(race(logits, params, positions), fast_tokens)
        inputs = (logits, params, positions)
        slow = _best_us(lambda inputs=inputs: race(*inputs), args.repeats)
        fast = _best_us(lambda inputs=inputs: sampling.sample(*inputs), args.repeats)
        print(f"| {batch} | {slow:.0f} | {fast:.0f} | {slow / fast:.1f}x |")


def _best_us(f, repeats: int) -> float:
    return min(timeit.repeat(f, number=100, repeat=repeats)) / 100 * 1e6


if __name__ == "__main__":
    main()

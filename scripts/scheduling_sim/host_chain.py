"""Where a random-token run's end comes from: the host's prompt-row chain, the device, the
tail (issue 39).

    python -m scripts.scheduling_sim.host_chain [POLICIES] [-c 64] [--seeds 0-7] [--jobs 2]
        [--waits]

The run is the study's (``realworld._random_run``). On the calibrated 4x H100 profile the
host gathers each prompt's PLE rows before its first chunk, one prompt after another,
each gather starting once a slot is free (``docs/devices.md``), so the run's end is

    end = first gather start + gathers + host idle + tail

where ``gathers`` is the host's busy time (every prompt's gather), ``host idle`` the gaps
between one gather's end and the next one's start (no slot was free, or nothing waited),
and ``tail`` the time from the last prompt's rows being ready to the last token. Per
policy, means over the seeds: output tok/s, the three terms, the device's busy share,
the mean wait from rows ready to the prompt's first frame, prompt frames, and prompts per
prompt frame; then each policy's host idle and tail against the first policy's, seed by
seed; ``--waits`` adds how the rows-ready -> first-frame waits spread, at the first
seed. Numbers are simulated.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from ignition.simulate.metrics import measure
from ignition.simulate.results import RunResult
from scripts.scheduling_sim.random_seeds import seed_list
from scripts.scheduling_sim.realworld import SeedMean, pool_map, random_run

COLUMNS = (
    "tok/s",
    "gathers s",
    "host idle s",
    "tail s",
    "device busy",
    "ready -> prompt ms",
    "prompt frames",
    "prompts / frame",
)


@dataclass(frozen=True)
class Chain:
    """One run's decomposition of its end (ms), with what explains the terms."""

    tokens_per_s: float
    first_start_ms: float
    gathers_ms: float
    host_idle_ms: float
    tail_ms: float
    end_ms: float
    device_busy: float  # share of the end the device ran frames
    waits_ms: tuple[float, ...]  # per request, rows ready -> first frame consuming them
    prompt_frames: int
    prompts_per_frame: float

    @property
    def ready_to_prompt_ms(self) -> float:
        return sum(self.waits_ms) / len(self.waits_ms)

    def row(self) -> tuple[float, ...]:
        return (
            self.tokens_per_s,
            self.gathers_ms / 1e3,
            self.host_idle_ms / 1e3,
            self.tail_ms / 1e3,
            self.device_busy,
            self.ready_to_prompt_ms,
            self.prompt_frames,
            self.prompts_per_frame,
        )


def chain_of(run: RunResult) -> Chain:
    """The decomposition of ``run`` (every request's prompt rows gathered on the host)."""
    gathers = sorted(r.prompt_rows_ms for r in run.requests if r.prompt_rows_ms is not None)
    if len(gathers) != len(run.requests):
        raise ValueError(
            f"{run.policy}: a request without a prompt-row gather (the device has no "
            "prompt_ready_ms, or the run stopped early)"
        )
    busy = sum(end - start for start, end in gathers)
    pairs = zip(gathers, gathers[1:])
    idle = sum(max(0.0, start - prev_end) for (_, prev_end), (start, _) in pairs)
    last_ready = max(end for _, end in gathers)
    waits = tuple(r.prompt_start_ms - r.prompt_rows_ms[1] for r in run.requests)
    prompt_frames = [e for e in run.executions if e.prompt_tokens > 0]
    whole = sum(1 for r in run.requests if r.prompt_start_ms is not None)
    return Chain(
        tokens_per_s=measure(run).output_tokens_per_s,
        first_start_ms=gathers[0][0],
        gathers_ms=busy,
        host_idle_ms=idle,
        tail_ms=run.end_ms - last_ready,
        end_ms=run.end_ms,
        device_busy=sum(e.device_ms for e in run.executions) / run.end_ms,
        waits_ms=waits,
        prompt_frames=len(prompt_frames),
        prompts_per_frame=whole / len(prompt_frames) if prompt_frames else 0.0,
    )


def run_chain(name: str, c: int, seed: int) -> Chain:
    """The study's run of ``name`` at concurrency ``c`` and ``seed`` (a pool job)."""
    return chain_of(random_run(c, name, seed))


def run_chains(names: Sequence[str], c: int, seeds: Sequence[int], jobs: int = 1) -> list[Chain]:
    """Every policy's runs, policy by policy, each over ``seeds`` in order."""
    return pool_map(run_chain, [(n, c, s) for n in names for s in seeds], jobs)


def seed_text(seeds: Sequence[int]) -> str:
    """``0-7`` for a run of consecutive seeds, else the list."""
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def table(names: Sequence[str], c: int, seeds: Sequence[int], chains: Sequence[Chain]) -> list[str]:
    """The means of ``run_chains(names, c, seeds)`` and the pairs against the first policy."""
    lines = [
        f"Random tokens, 4x H100, c = {c}: means over seeds {seed_text(seeds)}.",
        "",
        "| policy | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for i, name in enumerate(names):
        rows = [ch.row() for ch in chains[i * len(seeds) : (i + 1) * len(seeds)]]
        mean = [sum(col) / len(rows) for col in zip(*rows)]
        cells = (
            f"{mean[0]:,.1f}",
            f"{mean[1]:.2f}",
            f"{mean[2]:.2f}",
            f"{mean[3]:.2f}",
            f"{mean[4]:.1%}",
            f"{mean[5]:.1f}",
            f"{mean[6]:.0f}",
            f"{mean[7]:.2f}",
        )
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    if len(seeds) > 1 and len(names) > 1:
        lines += paired(names, chains, len(seeds))
    return lines


def paired(names: Sequence[str], chains: Sequence[Chain], count: int) -> list[str]:
    """Each policy against the first, seed by seed: host idle and tail differences (ms),
    mean +- standard error (the seeds' noise is shared, so pairs resolve what means cannot)."""
    first = chains[:count]
    lines = [
        "",
        f"Against `{names[0]}`, seed by seed (ms, mean +- standard error):",
        "",
        "| policy | host idle | tail |",
        "|---|---|---|",
    ]
    for i, name in enumerate(names[1:], start=1):
        own = chains[i * count : (i + 1) * count]
        cells = []
        for term in ("host_idle_ms", "tail_ms"):
            got = SeedMean.of([getattr(a, term) - getattr(b, term) for a, b in zip(own, first)])
            cells.append(f"{got.mean:+.0f} +- {got.se:.0f}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


WAIT_BINS_MS = (0, 5, 10, 20, 30, 40, 50, 60, 80)


def wait_histogram(name: str, chain: Chain) -> str:
    """How many prompts of one run waited how long from rows ready to their first frame."""
    edges = (*WAIT_BINS_MS, float("inf"))
    counts = [sum(lo <= w < hi for w in chain.waits_ms) for lo, hi in zip(edges, edges[1:])]
    cells = ", ".join(f"{lo}-: {n}" for lo, n in zip(WAIT_BINS_MS, counts))
    return f"| `{name}` | {cells} |"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="?", default="helios,helios+w1,vllm-padded")
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--seeds", type=seed_list, default=[0, 1, 2, 3])
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument(
        "--waits", action="store_true", help="also each policy's wait histogram, first seed"
    )
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        parser.error(f"--concurrency {args.concurrency}: must be >= 1")
    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    chains = run_chains(names, args.concurrency, args.seeds, args.jobs)
    print("\n".join(table(names, args.concurrency, args.seeds, chains)))
    if args.waits:
        print(f"\nRows ready -> first frame, prompts per bin (ms), seed {args.seeds[0]}:\n")
        print("| policy | prompts |\n|---|---|")
        for i, name in enumerate(names):
            print(wait_histogram(name, chains[i * len(args.seeds)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

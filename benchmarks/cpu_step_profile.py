"""Where one CPU prefill chunk and one CPU decode step spend their time (a profile).

Builds the random Qwen3.5 of ``benchmarks/vs_transformers.py`` (same checkpoint writer, same
build options), serves it on CPU, and times ``Engine.step`` end to end with wrappers around
the loop's parts that read the process's CPU time (other processes on a shared machine
disturb it far less than wall time; with ``--threads`` above 1 a row adds its threads'
time): Helios (plan, commit, complete), admission, staging and
row binding, the program run (packed metadata, embedding, each decoder layer, final norm,
vocabulary projection, sampling, logprobs, sampling history, state commit), result
decoding, publication and reaping. Every part is timed exclusive of the parts inside it, so
the rows add up to the step time.

The prefill table is one request of ``--prompt-tokens`` tokens and one new token (the
prompt's state initialization, its prefill chunk, the first token); the decode table is the
difference between a ``--new-tokens`` run and that one, divided by the extra decode steps
(per decode step). The fastest of ``--repeats`` runs of each is reported.

    .venv/bin/python benchmarks/cpu_step_profile.py [--threads 1] [--batch 1] [--repeats 3]
        [--dtype float32|bfloat16]

The wrappers cost about a microsecond per call, so the host rows are slightly high.
"""

from __future__ import annotations

import argparse
import collections
import functools
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

# A part of a step: (label, group) where the group sums rows for the summary.
HELIOS = ("Helios (plan, commit, complete, admit)", "host")
ADMIT = ("inbox + admission (host)", "host")
LAUNCH = ("launch: checks, snapshot copy of outputs", "host")
BIND = ("staging: row binding", "host")
UPLOAD = ("staging: upload", "host")
RUN = ("program run: copy into static outputs", "host")
GLUE = ("forward and step glue (rope, streams, pending tokens, shifts)", "forward")
META = ("packed metadata (PackedMeta.build)", "forward")
EMBED = ("embedding", "forward")
NORM = ("final norm", "forward")
HEAD = ("lm_head projection (sampled rows)", "forward")
SAMPLE = ("sampling (processing, mask, sample)", "sampling")
LOGPROBS = ("token logprobs (log_softmax + top-k)", "sampling")
HISTORY = ("sampling history (begin, prompt, record)", "sampling")
COMMIT = ("state commit", "forward")
WAIT = ("wait + result decoding", "host")
PUBLISH = ("publication (detokenize, stops, chunks)", "host")
REAP = ("reap + usage gauges", "host")
LOOP = ("engine loop, other", "host")


class Clock:
    """Exclusive CPU time per part: a part's time less the parts timed inside it."""

    def __init__(self) -> None:
        self.exclusive: dict[tuple[str, str], float] = collections.defaultdict(float)
        self._stack: list[float] = []  # time spent in children of each open part

    def timed(self, part: tuple[str, str], fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self._stack.append(0.0)
            began = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.process_time() - began
                children = self._stack.pop()
                self.exclusive[part] += spent - children
                if self._stack:
                    self._stack[-1] += spent

        return wrapper

    def patch(self, owner: object, name: str, part: tuple[str, str]) -> None:
        setattr(owner, name, self.timed(part, getattr(owner, name)))

    def reset(self) -> dict[tuple[str, str], float]:
        out, self.exclusive = dict(self.exclusive), collections.defaultdict(float)
        return out


def instrument(engine, model, clock: Clock) -> None:
    import ignition.compiler.graph as graph
    import ignition.compiler.programs as programs
    import ignition.model.step as step
    import ignition.runtime.executors.program as program_executor
    from ignition.model.logits_processing import SlotHistory
    from ignition.model.packing import PackedMeta

    scheduler = engine.scheduler
    for name in ("plan", "commit", "complete", "advance_to", "admit", "can_admit", "usage"):
        if hasattr(scheduler, name):
            clock.patch(scheduler, name, HELIOS)
    clock.patch(engine, "step", LOOP)
    clock.patch(engine, "_drain_inbox", ADMIT)
    clock.patch(engine.admissions, "admit", ADMIT)
    clock.patch(engine.worker, "launch", LAUNCH)
    clock.patch(engine.worker, "wait", WAIT)
    clock.patch(engine.publisher, "publish", PUBLISH)
    clock.patch(engine.publisher, "record_frame", PUBLISH)
    clock.patch(engine, "_reap", REAP)
    clock.patch(engine.lifecycle, "report_usage", REAP)
    clock.patch(program_executor, "bind_row", BIND)
    clock.patch(program_executor, "bind_grammar", BIND)
    clock.patch(programs.Program, "upload", UPLOAD)
    clock.patch(graph.PreparedProgram, "run", RUN)
    clock.patch(programs, "run_step", GLUE)  # the program closures read it from there
    for name in ("sample", "apply_token_mask"):
        clock.patch(step, name, SAMPLE)
    clock.patch(SlotHistory, "process", SAMPLE)
    clock.patch(step, "token_logprobs", LOGPROBS)
    for name in ("begin", "add_prompt", "record"):
        clock.patch(SlotHistory, name, HISTORY)
    clock.patch(PackedMeta, "build", META)
    clock.patch(model, "embed", EMBED)
    clock.patch(model, "project", HEAD)
    clock.patch(model, "commit", COMMIT)
    clock.patch(model, "absorb_draft_context", COMMIT)
    if model.norm is not None:
        clock.patch(model.norm, "forward", NORM)
    for i, layer in enumerate(model.layers):
        clock.patch(layer, "forward", (f"layer {i} ({layer.kind} + MLP)", "forward"))


def serve(engine, prompts: list[list[int]], max_tokens: int, counter) -> int:
    from ignition.runtime.requests.request import GenerationRequest, SamplingParams

    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    for prompt in prompts:
        engine.submit(GenerationRequest(f"r{next(counter)}", tuple(prompt), sampling), print_none)
    steps = 0
    while engine.has_work:
        engine.step()
        steps += 1
    return steps


def print_none(chunk) -> None:
    pass


def fastest(clock: Clock, run: Callable[[], int], repeats: int) -> tuple[dict, int]:
    best: tuple[dict, int] | None = None
    for _ in range(repeats):
        clock.reset()
        steps = run()
        parts = clock.reset()
        if best is None or sum(parts.values()) < sum(best[0].values()):
            best = (parts, steps)
    assert best is not None
    return best


def table(title: str, parts: dict, per: int, unit: str) -> None:
    total = sum(parts.values())
    print(f"\n{title}: {total / per * 1e3:.2f} ms per {unit}")
    print(f"| part | ms per {unit} | share |\n|---|---:|---:|")
    for (label, _), seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {label} | {seconds / per * 1e3:.3f} | {seconds / total:6.1%} |")
    groups: dict[str, float] = collections.defaultdict(float)
    for (_, group), seconds in parts.items():
        groups[group] += seconds
    summary = ", ".join(f"{g} {s / total:.1%}" for g, s in sorted(groups.items()))
    print(f"\nby group: {summary}")


def open_random_qwen35(
    root: Path, threads: int, prompt_tokens: int, dtype: torch.dtype = torch.float32
):
    """vs_transformers.py's random Qwen3.5 saved in ``dtype``, built under ``root`` as it
    builds it, served on CPU: (bundle, engine)."""
    from vs_transformers import build_cpu_bundle, write_checkpoint

    from ignition.serving.engine import ServeOptions, open_engine

    weights, out = root / "weights", root / "bundle"
    write_checkpoint(weights, dtype=dtype)
    build_cpu_bundle(weights, out, prompt_tokens, threads)
    serve_options = ServeOptions(str(out), speculation="off", device="cpu", num_threads=threads)
    return open_engine(serve_options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="ignition-cpu-profile-"))
    try:
        dtype = getattr(torch, args.dtype)
        bundle, engine = open_random_qwen35(root, args.threads, args.prompt_tokens, dtype)
        generator = torch.Generator().manual_seed(1)
        shape = (args.batch, args.prompt_tokens)
        prompts = torch.randint(5, 4096, shape, generator=generator).tolist()
        counter = iter(range(1 << 30))
        serve(engine, prompts, 2, counter)  # warm-up
        clock = Clock()
        instrument(engine, bundle.model, clock)
        one, _ = fastest(clock, lambda: serve(engine, prompts, 1, counter), args.repeats)
        many, _ = fastest(
            clock, lambda: serve(engine, prompts, args.new_tokens, counter), args.repeats
        )
        decode = {part: max(0.0, many.get(part, 0.0) - one.get(part, 0.0)) for part in many}
        print(
            f"random Qwen3.5 (vs_transformers.py), {args.dtype}, CPU, "
            f"{torch.get_num_threads()} thread(s), "
            f"batch {args.batch}, prompt {args.prompt_tokens}, fastest of {args.repeats}"
        )
        table("prefill (state init + one chunk + first token)", one, 1, "request batch")
        table("decode", decode, args.new_tokens - 1, "decode step")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

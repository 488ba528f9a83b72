"""Does ``torch.compile`` (inductor, CPU) of the decoder layers make a CPU decode step faster?
(a probe: numbers only, nothing in the engine changes).

Loads vs_transformers.py's random Qwen3.5 twice into Ignition's model (reference kernels, as
the CPU engine runs them), prefills ``--batch`` prompts into both, then takes decode steps
of one token per row with ``run_step`` on a program of exactly ``--batch`` rows: one copy
eager, the other with each decoder layer's ``forward`` (``--scope layers``) or only each
layer's MLP (``--scope mlp``) wrapped in ``torch.compile(dynamic=False)``. It reports the
compile time (the first compiled steps), the median step time of each, taking turns step by
step, and the largest logit difference between the two (the eager step is the reference;
both copies decode the eager copy's tokens, so they see the same inputs). ``--phase
prefill`` times each prompt's one-chunk prefill into fresh slots instead.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_compile_probe.py --batch 1 --scope layers
    PYTHONPATH=. .venv/bin/python benchmarks/cpu_compile_probe.py --batch 4 --scope mlp
    PYTHONPATH=. .venv/bin/python benchmarks/cpu_compile_probe.py --phase prefill --steps 5

Compiling on a 2-core machine takes minutes; the test suite never does.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.step import run_step
from ignition.model.weights import load_checkpoint

PAGE_SIZE = 16


class Decoder:
    """One model copy and its slots, prefilled with ``prompts``."""

    def __init__(self, path: Path, prompts: list[list[int]]) -> None:
        self.model = load_checkpoint(path).model.eval()
        self.prompts = prompts
        self.first, _, _ = self.prefill()
        batch = len(prompts)
        self.capacity = PackedCapacity.mixed(batch, 1, 0)
        self.greedy = SamplingTensors.greedy(batch)

    def prefill(self) -> tuple[list[int], torch.Tensor, float]:
        """Fresh slots, each prompt one chunk: (first tokens, last logits, seconds)."""
        batch = len(self.prompts)
        pages = (len(self.prompts[0]) + 512) // PAGE_SIZE
        self.state = ModelState.allocate(self.model.config, batch, batch * pages, PAGE_SIZE, pages)
        contiguous_pages(self.state)
        first, logits, seconds = [], [], 0.0
        for slot, prompt in enumerate(self.prompts):
            capacity = PackedCapacity.mixed(1, 1, len(prompt))
            inputs = PackedInputs.build(capacity, [prompt], [slot], prefill_row=0)
            start = time.perf_counter()
            out = run_step(self.model, self.state, inputs, capacity, SamplingTensors.greedy(1))
            seconds += time.perf_counter() - start
            first.append(int(out.next_tokens[0]))
            logits.append(out.target.logits_at(torch.tensor([len(prompt) - 1]))[0])
        return first, torch.stack(logits), seconds

    def step(self, tokens: list[int]) -> tuple[list[int], torch.Tensor, float]:
        """(next tokens, their rows' logits, seconds)."""
        inputs = PackedInputs.build(self.capacity, [[t] for t in tokens], list(range(len(tokens))))
        start = time.perf_counter()
        out = run_step(self.model, self.state, inputs, self.capacity, self.greedy)
        seconds = time.perf_counter() - start
        logits = out.target.logits_at(out.target.meta.cu_query_lens[1:].long() - 1)
        return out.next_tokens[: len(tokens)].tolist(), logits[: len(tokens)], seconds

    def compile(self, scope: str) -> None:
        for layer in self.model.layers:
            target = layer if scope == "layers" else layer.mlp
            target.forward = torch.compile(target.forward, dynamic=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--scope", choices=("layers", "mlp"), default="layers")
    parser.add_argument("--phase", choices=("decode", "prefill"), default="decode")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vs_transformers import write_checkpoint

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="ignition-compile-probe-"))
    try:
        write_checkpoint(root, dtype=getattr(torch, args.dtype))
        generator = torch.Generator().manual_seed(1)
        shape = (args.batch, args.prompt_tokens)
        prompts = torch.randint(5, 4096, shape, generator=generator).tolist()
        with torch.inference_mode(), use_backend("reference"):
            eager, compiled = Decoder(root, prompts), Decoder(root, prompts)
            compiled.compile(args.scope)
            times: dict[str, list[float]] = {"eager": [], "compiled": []}
            worst, compile_s = 0.0, 0.0
            if args.phase == "prefill":
                for rep in range(args.steps + 2):
                    _, reference, a = eager.prefill()
                    _, logits, b = compiled.prefill()
                    worst = max(worst, float((logits.float() - reference.float()).abs().max()))
                    if rep < 2:  # compiles (a second time if the first run's guards fail)
                        compile_s += b
                        continue
                    times["eager"].append(a)
                    times["compiled"].append(b)
            else:
                tokens = eager.first
                for step in range(args.steps + 2):
                    following, reference, a = eager.step(tokens)
                    _, logits, b = compiled.step(tokens)
                    worst = max(worst, float((logits.float() - reference.float()).abs().max()))
                    tokens = following
                    if step < 2:
                        compile_s += b
                        continue
                    times["eager"].append(a)
                    times["compiled"].append(b)
        a, b = (statistics.median(times[k]) * 1e3 for k in ("eager", "compiled"))
        print(
            f"random Qwen3.5, {args.dtype}, CPU, {torch.get_num_threads()} thread(s), batch "
            f"{args.batch}, context {args.prompt_tokens}, torch.compile of each decoder "
            f"{'layer' if args.scope == 'layers' else 'MLP'}"
        )
        print(f"compile (first two compiled steps): {compile_s:.1f} s")
        what = "decode step" if args.phase == "decode" else f"prefill of {args.batch} prompt(s)"
        print(f"{what}, median of {args.steps}: eager {a:.2f} ms, compiled {b:.2f} ms")
        print(f"eager / compiled: {a / b:.2f}x; largest logit difference: {worst:.2e}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

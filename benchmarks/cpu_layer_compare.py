"""Ignition's packed decode step against transformers' decode forward, component by component,
on vs_transformers.py's random Qwen3.5 (CPU, fp32).

Both models load the same random checkpoint; each gets ``--batch`` prompts of
``--prompt-tokens`` tokens, then decode steps of one token per row are timed: Ignition's
``run_step`` on a program of exactly ``--batch`` decode rows (reference kernels, as the CPU
engine runs them), transformers' ``model(input_ids [B, 1], past_key_values=...)``. Forward
hooks on the same-named modules of both (``linear_attn``, ``self_attn``, ``mlp``, ``norm``,
``lm_head``) time each component; the rest of the step is everything outside them (embedding,
layer norms and residuals, packed metadata; the greedy argmax on their side), with
Ignition's state commit and sampling timed on their own. The
two take turns step by step, and each row is the median over the timed steps.

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_layer_compare.py --batch 4 --steps 40
    PYTHONPATH=. .venv/bin/python benchmarks/cpu_layer_compare.py --batch 4 --profile  # op table
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

import ignition.model.step as step_module
from ignition.kernels import use_backend
from ignition.model.packing import PackedCapacity, PackedInputs
from ignition.model.sampling import SamplingTensors
from ignition.model.state import ModelState, contiguous_pages
from ignition.model.step import run_step
from ignition.model.weights import load_checkpoint

PAGE_SIZE = 16


class Timers:
    """Wall time per component label, from forward pre/post hooks (one thread: no overlap)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self._start: dict[int, float] = {}

    def attach(self, module: torch.nn.Module, label: str) -> None:
        def pre(mod, args, kwargs=None):
            self._start[id(mod)] = time.perf_counter()

        def post(mod, args, out):
            self.seconds[label] += time.perf_counter() - self._start.pop(id(mod))

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    def wrap(self, owner: object, name: str, label: str) -> None:
        """Time calls of ``owner.name`` (a function the step looks up at call time)."""
        fn = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        out, self.seconds = dict(self.seconds), collections.defaultdict(float)
        return out


def attach_all(timers: Timers, layers, norm, head) -> None:
    for layer in layers:
        if hasattr(layer, "linear_attn") and layer.linear_attn is not None:
            timers.attach(layer.linear_attn, "GDN mixer (6 layers)")
            timers.attach(layer.mlp, "MLP of GDN layers")
        else:
            timers.attach(layer.self_attn, "attention mixer (2 layers)")
            timers.attach(layer.mlp, "MLP of attention layers")
    timers.attach(norm, "final norm")
    timers.attach(head, "lm_head")


class Ignition:
    def __init__(self, path: Path, batch: int, prompts: list[list[int]]) -> None:
        self.model = load_checkpoint(path).model.eval()
        pages = (len(prompts[0]) + 512) // PAGE_SIZE
        self.state = ModelState.allocate(self.model.config, batch, batch * pages, PAGE_SIZE, pages)
        contiguous_pages(self.state)
        self.batch = batch
        self.tokens = []
        for slot, prompt in enumerate(prompts):
            capacity = PackedCapacity.mixed(1, 1, len(prompt))
            inputs = PackedInputs.build(capacity, [prompt], [slot], prefill_row=0)
            out = run_step(self.model, self.state, inputs, capacity, SamplingTensors.greedy(1))
            self.tokens.append(int(out.next_tokens[0]))
        self.capacity = PackedCapacity.mixed(batch, 1, 0)
        self.greedy = SamplingTensors.greedy(batch)

    def step(self) -> None:
        inputs = PackedInputs.build(
            self.capacity, [[t] for t in self.tokens], list(range(self.batch))
        )
        out = run_step(self.model, self.state, inputs, self.capacity, self.greedy)
        self.tokens = out.next_tokens[: self.batch].tolist()


class Transformers:
    def __init__(self, path: Path, prompts: list[list[int]]) -> None:
        import transformers as tf

        self.model = tf.Qwen3_5ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        out = self.model(input_ids=torch.tensor(prompts), use_cache=True)
        self.cache = out.past_key_values
        self.tokens = out.logits[:, -1].argmax(-1, keepdim=True)

    def step(self) -> None:
        out = self.model(input_ids=self.tokens, past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        self.tokens = out.logits[:, -1].argmax(-1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--profile", action="store_true", help="print torch.profiler op tables")
    args = parser.parse_args()

    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vs_transformers import write_checkpoint

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="ignition-layer-compare-"))
    try:
        write_checkpoint(root)
        generator = torch.Generator().manual_seed(1)
        shape = (args.batch, args.prompt_tokens)
        prompts = torch.randint(5, 4096, shape, generator=generator).tolist()
        with torch.inference_mode(), use_backend("reference"):
            ours, theirs = Ignition(root, args.batch, prompts), Transformers(root, prompts)
            if args.profile:
                profile(ours, theirs)
                return
            sides = {"Ignition": ours, "transformers": theirs}
            timers = {name: Timers() for name in sides}
            attach_all(timers["Ignition"], ours.model.layers, ours.model.norm, ours.model.lm_head)
            timers["Ignition"].wrap(ours.model, "commit", "state commit (Ignition)")
            for name in ("sample", "token_logprobs", "apply_token_mask"):
                timers["Ignition"].wrap(step_module, name, "sampling, logprobs (Ignition)")
            inner = theirs.model.model
            attach_all(timers["transformers"], inner.layers, inner.norm, theirs.model.lm_head)
            samples = {name: collections.defaultdict(list) for name in sides}
            for step in range(args.steps + 3):
                for name, side in sides.items():
                    start = time.perf_counter()
                    side.step()
                    total = time.perf_counter() - start
                    parts = timers[name].take()
                    if step < 3:
                        continue  # warm-up
                    parts["rest of the step"] = total - sum(parts.values())
                    parts["step total"] = total
                    for label, seconds in parts.items():
                        samples[name][label].append(seconds)
        print(
            f"random Qwen3.5, CPU fp32, {torch.get_num_threads()} thread(s), batch {args.batch}, "
            f"context {args.prompt_tokens}, median of {args.steps} decode steps (ms per step)"
        )
        print("| component | Ignition | transformers | ratio |\n|---|---:|---:|---:|")
        labels = list(samples["Ignition"])
        labels.append(labels.pop(labels.index("step total")))
        for label in labels:
            a = statistics.median(samples["Ignition"][label]) * 1e3
            theirs = samples["transformers"].get(label)
            if theirs is None:
                print(f"| {label} | {a:.3f} | - | - |")
                continue
            b = statistics.median(theirs) * 1e3
            print(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def profile(ours: Ignition, theirs: Transformers, steps: int = 10) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    for name, side in (("Ignition", ours), ("transformers", theirs)):
        for _ in range(3):
            side.step()
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(steps):
                side.step()
        print(f"\n{name}, {steps} decode steps, ops grouped by input shape")
        averages = prof.key_averages(group_by_input_shape=True)
        print(averages.table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=40))


if __name__ == "__main__":
    main()

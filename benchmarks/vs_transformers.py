"""Ignition vs transformers on the same random Qwen3.5 checkpoint, on CPU (a benchmark).

Writes a random ~50M-parameter Qwen3.5 (dense, text-only layout) with transformers'
own class, builds it with ``ignition build`` (recipe qwen35, speculation off: a random model's
drafts are never accepted, and transformers' generate does not speculate either), then times
both at batch 1 and 4 with greedy decoding and end-of-sequence ignored:

- prefill tokens/s: batch * prompt tokens / the time to produce one token;
- decode tokens/s: batch * (new tokens - 1) / (the time for all of them - the one-token time).

    .venv/bin/python benchmarks/vs_transformers.py [--threads N] [--prompt-tokens P]
        [--new-tokens N] [--repeats R]

Both sides run with the same torch thread count; Ignition serves with Helios' throughput
preset. transformers is the test extra's; the Ignition runtime never imports it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

ASSET = Path(__file__).resolve().parents[1] / "ignition" / "assets" / "qwen38-tiny"


def write_checkpoint(path: Path, seed: int = 0) -> int:
    """A random Qwen3.5 of ~50M parameters; returns its parameter count."""
    import transformers as tf

    config = tf.Qwen3_5TextConfig(
        vocab_size=32000,
        hidden_size=512,
        intermediate_size=2048,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
    )
    torch.manual_seed(seed)
    model = tf.Qwen3_5ForCausalLM(config).eval()
    with torch.no_grad():  # random norms and decays: transformers' init leaves them trivial
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(1.0 if "linear_attn.norm" in name else 0.0, 0.2)
            elif name.endswith("A_log"):
                param.uniform_(-1.0, 1.0)
    model.save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(ASSET / name, path / name)
    return sum(p.numel() for p in model.parameters())


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def time_ignition(
    bundle: Path, prompts: list[list[int]], new_tokens: int, repeats: int, threads: int
):
    from ignition.helios.config import policy_from_preset
    from ignition.runtime.requests import GenerationRequest, SamplingParams
    from ignition.serving import ServeOptions, open_engine

    # The throughput preset: the balanced default often decodes one request per frame on
    # CPU, which measures its latency preference rather than batched decode.
    policy = policy_from_preset("throughput")
    options = ServeOptions(
        str(bundle), speculation="off", device="cpu", num_threads=threads, policy=policy
    )
    _, engine = open_engine(options)
    counter = iter(range(1 << 30))

    def run(max_tokens: int) -> None:
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        for prompt in prompts:
            request = GenerationRequest(f"r{next(counter)}", tuple(prompt), sampling)
            engine.submit(request, lambda chunk: None)
        engine.run_until_idle()

    run(2)  # warm-up
    return best_of(repeats, lambda: run(1)), best_of(repeats, lambda: run(new_tokens))


def time_transformers(weights: Path, prompts: list[list[int]], new_tokens: int, repeats: int):
    import transformers as tf

    model = tf.Qwen3_5ForCausalLM.from_pretrained(weights).eval()
    input_ids = torch.tensor(prompts)

    def run(max_tokens: int) -> None:
        with torch.no_grad():
            model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_tokens,
                min_new_tokens=max_tokens,
                do_sample=False,
            )

    run(2)
    return best_of(repeats, lambda: run(1)), best_of(repeats, lambda: run(new_tokens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from ignition.compiler.build import build_bundle
    from ignition.recipes import LoadOptions

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="ignition-vs-transformers-"))
    weights, bundle = root / "weights", root / "bundle"
    num_params = write_checkpoint(weights)
    chunk = max(64, 1 << (args.prompt_tokens - 1).bit_length())
    options = LoadOptions(concurrency=4, max_prefill_chunk=chunk, speculation="off")
    build_bundle(None, options, weights=weights, out_dir=bundle, device="cpu", threads=args.threads)
    print(
        f"random Qwen3.5, {num_params / 1e6:.1f}M parameters, fp32, CPU, {args.threads} "
        f"thread(s); prompt {args.prompt_tokens} tokens, {args.new_tokens} new tokens, greedy"
    )
    print(
        f"{'batch':>5} {'phase':>8} {'ignition tok/s':>15} {'transformers tok/s':>19} {'ratio':>6}"
    )
    generator = torch.Generator().manual_seed(1)
    for batch in (1, 4):
        prompts = torch.randint(5, 4096, (batch, args.prompt_tokens), generator=generator).tolist()
        ours = time_ignition(bundle, prompts, args.new_tokens, args.repeats, args.threads)
        theirs = time_transformers(weights, prompts, args.new_tokens, args.repeats)
        for phase, rate in (("prefill", _prefill_rate), ("decode", _decode_rate)):
            a = rate(ours, batch, args.prompt_tokens, args.new_tokens)
            b = rate(theirs, batch, args.prompt_tokens, args.new_tokens)
            print(f"{batch:>5} {phase:>8} {a:>15.1f} {b:>19.1f} {a / b:>5.2f}x")
    shutil.rmtree(root, ignore_errors=True)


def _prefill_rate(times: tuple[float, float], batch: int, prompt: int, new: int) -> float:
    return batch * prompt / times[0]


def _decode_rate(times: tuple[float, float], batch: int, prompt: int, new: int) -> float:
    return batch * (new - 1) / max(times[1] - times[0], 1e-9)


if __name__ == "__main__":
    main()

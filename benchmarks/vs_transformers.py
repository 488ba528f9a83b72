"""Ignition vs transformers on the same random checkpoint, on CPU (a benchmark).

Writes a random ~50M-parameter Qwen3.5 (dense, text-only layout) or, with ``--model qwen4_exp``,
a ~100M-parameter Qwen3.8-Flash-Next (MoE, four streams, one PLE layer, QSA with a 64-token
index budget below the prompt length) with transformers' own class, builds it with ``ignition
build`` (speculation off: a random model's drafts are never accepted, and transformers'
generate does not speculate either), then times both at batch 1 and 4 with greedy decoding and
end-of-sequence ignored:

- prefill tokens/s: batch * prompt tokens / the time to produce one token;
- decode tokens/s: batch * (new tokens - 1) / (the time for all of them - the one-token time).

    .venv/bin/python benchmarks/vs_transformers.py [--model qwen35|qwen4_exp] [--threads N]
        [--prompt-tokens P] [--new-tokens N] [--repeats R] [--policy balanced|throughput]
        [--dtype float32|bfloat16] [--scheduler helios|direct] [--clock wall|cpu]

The bundle prepares prompt buckets up to four times the prompt's chunk and a four-lane
program there (the load option ``prompt_lanes``), so the batch's four prompts can run in one
frame, as transformers runs them in one batch. ``--scheduler direct`` serves through the
diagnostic direct scheduler (``debug-serve --direct``), which packs waiting prompts into a
multi-lane prefill program whenever each fits a lane.

``--dtype`` is the checkpoint's: the random weights are cast to it and saved with it, so
both sides run in it (Ignition serves a checkpoint in its config's dtype; transformers loads
it with the same ``dtype``). bfloat16 on a CPU with AVX512-BF16/AMX runs native bf16 matmuls.

Both sides run with the same torch thread count and take turns run by run (best of
``--repeats`` each), so a shared machine's load falls on both alike; ``--clock cpu`` times
each run by the process's CPU time instead of wall time (with one thread, the work done,
whatever else the machine runs: the way to compare on a machine other processes share).
Ignition serves with the chosen Helios preset (balanced, the serving default, unless told
otherwise). transformers is the test extra's; the Ignition runtime never imports it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

ASSET = Path(__file__).resolve().parents[1] / "ignition" / "assets" / "qwen38-tiny"


def write_checkpoint(path: Path, seed: int = 0, dtype: torch.dtype = torch.float32) -> int:
    """A random Qwen3.5 of ~50M parameters, saved in ``dtype``; returns its parameter count."""
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
    model.to(dtype).save_pretrained(path)
    write_tokenizer(path, config.vocab_size)
    return sum(p.numel() for p in model.parameters())


def write_qwen4_exp_checkpoint(
    path: Path, seed: int = 0, dtype: torch.dtype = torch.float32
) -> int:
    """A random Qwen3.8-Flash-Next (qwen4_exp) of ~100M parameters, saved in ``dtype``;
    returns the count."""
    import transformers as tf

    config = tf.Qwen4ExpTextConfig(
        vocab_size=32000,
        hidden_size=512,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=384,
        shared_expert_intermediate_size=512,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
        output_gate_type="sigmoid",
        eos_token_id=0,
        hc_count=4,
        hc_lowrank=64,
        ple_layer_ids=[2],
        ple_embed_dim=256,
        heads_per_ngram=4,
        ngram_vocab_size_base=20_000,
        split_ngram_parts=4,
        indexer_n_heads=8,
        indexer_kv_heads=1,
        indexer_head_dim=64,
        indexer_budget=64,
        indexer_compress_ratio=4,
    )
    torch.manual_seed(seed)
    model = tf.Qwen4ExpForCausalLM(config).eval()
    with torch.no_grad():  # random norms, decays and PLE conv: the init leaves them trivial
        for name, param in model.named_parameters():
            if "norm" in name:
                param.normal_(1.0 if "linear_attn.norm" in name else 0.0, 0.2)
            elif name.endswith("A_log"):
                param.uniform_(-1.0, 1.0)
            elif name.endswith("ple.conv1d.weight"):
                param.normal_(0.0, 0.5)
    model.to(dtype).save_pretrained(path)
    write_tokenizer(path, config.vocab_size)
    return sum(p.numel() for p in model.parameters())


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MODELS = {"qwen35": (write_checkpoint, "Qwen3_5ForCausalLM", "Qwen3.5"),
          "qwen4_exp": (write_qwen4_exp_checkpoint, "Qwen4ExpForCausalLM", "Qwen4Exp")}  # fmt: skip


def write_tokenizer(path: Path, vocab_size: int) -> None:
    """A word-level tokenizer covering every id of the model, each with visible text.

    The random model samples ids across its whole vocabulary. With the tiny asset's
    4096-token tokenizer most of them decode to nothing, so their bursts publish no text,
    count no delivery (scheduling-runtime-design.md, "Service accounting and
    publication") and let every decoder's delivery price grow without bound; the
    balanced preset then served one request per frame. A real checkpoint's tokenizer
    covers its vocabulary, so the benchmark's must too.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<|image|>"]
    vocab = {token: i for i, token in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), vocab_size)})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<|pad|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(specials)
    tokenizer.save(str(path / "tokenizer.json"))
    shutil.copyfile(ASSET / "tokenizer_config.json", path / "tokenizer_config.json")


def build_cpu_bundle(weights: Path, out_dir: Path, prompt_tokens: int, threads: int) -> None:
    """The bundle every CPU benchmark serves: four slots, no speculation, prompt buckets up
    to four times the prompt's power of two (at least 64), and four prompt lanes there: one
    program carries four such prompts (load option prompt_lanes)."""
    from ignition.compiler.build import build_bundle
    from ignition.recipes import LoadOptions

    bucket = 4 * max(64, 1 << (prompt_tokens - 1).bit_length())
    options = LoadOptions(
        concurrency=4, max_prefill_chunk=bucket, speculation="off", prompt_lanes=((bucket, 4),)
    )
    build_bundle(None, options, weights=weights, out_dir=out_dir, device="cpu", threads=threads)


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def elapsed(run, max_tokens: int, clock=time.perf_counter) -> float:
    began = clock()
    run(max_tokens)
    return clock() - began


Times = tuple[float, float]  # (one-token run, new-tokens run) in seconds


def interleaved(
    ours, theirs, new_tokens: int, repeats: int, clock=time.perf_counter
) -> tuple[Times, Times]:
    """Best-of-``repeats`` (one-token, ``new_tokens``) times of both sides, taking turns
    run by run so that a shared machine's load falls on both alike."""
    times: dict[str, list[float]] = {key: [] for key in ("a1", "an", "b1", "bn")}
    for _ in range(repeats):
        times["a1"].append(elapsed(ours, 1, clock))
        times["b1"].append(elapsed(theirs, 1, clock))
        times["an"].append(elapsed(ours, new_tokens, clock))
        times["bn"].append(elapsed(theirs, new_tokens, clock))
    return (min(times["a1"]), min(times["an"])), (min(times["b1"]), min(times["bn"]))


def ignition_runner(
    bundle: Path, prompts: list[list[int]], threads: int, preset: str, direct: bool = False
):
    from ignition.helios.config import policy_from_preset
    from ignition.runtime.requests.request import GenerationRequest, SamplingParams
    from ignition.serving.engine import ServeOptions, open_engine

    policy = policy_from_preset(preset)
    options = ServeOptions(
        str(bundle), speculation="off", device="cpu", num_threads=threads, policy=policy
    )
    _, engine = open_engine(options, direct=direct)
    counter = iter(range(1 << 30))

    def run(max_tokens: int) -> None:
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        for prompt in prompts:
            request = GenerationRequest(f"r{next(counter)}", tuple(prompt), sampling)
            engine.submit(request, lambda chunk: None)
        engine.run_until_idle()

    run(2)  # warm-up
    return run


def transformers_runner(
    weights: Path, prompts: list[list[int]], class_name: str, dtype: torch.dtype
):
    import transformers as tf

    model = getattr(tf, class_name).from_pretrained(weights, dtype=dtype).eval()
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
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen35")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--policy", default="balanced", help="Helios preset for Ignition (balanced, throughput)"
    )
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument(
        "--scheduler",
        choices=("helios", "direct"),
        default="helios",
        help="Ignition's scheduler: Helios (serving) or the diagnostic direct one",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time runs by wall time or by the process's CPU time (a shared machine)",
    )
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="ignition-vs-transformers-"))
    weights, bundle = root / "weights", root / "bundle"
    write, class_name, title = MODELS[args.model]
    num_params = write(weights, dtype=DTYPES[args.dtype])
    build_cpu_bundle(weights, bundle, args.prompt_tokens, args.threads)
    print(
        f"random {title}, {num_params / 1e6:.1f}M parameters, {args.dtype}, CPU, {args.threads} "
        f"thread(s); prompt {args.prompt_tokens} tokens, {args.new_tokens} new tokens, greedy; "
        + (f"Helios {args.policy} preset" if args.scheduler == "helios" else "direct scheduler")
        + f"; {args.clock} clock"
    )
    print(
        f"{'batch':>5} {'phase':>8} {'ignition tok/s':>15} {'transformers tok/s':>19} {'ratio':>6}"
    )
    generator = torch.Generator().manual_seed(1)
    for batch in (1, 4):
        prompts = torch.randint(5, 4096, (batch, args.prompt_tokens), generator=generator).tolist()
        ours, theirs = interleaved(
            ignition_runner(
                bundle, prompts, args.threads, args.policy, args.scheduler == "direct"
            ),
            transformers_runner(weights, prompts, class_name, DTYPES[args.dtype]),
            args.new_tokens,
            args.repeats,
            CLOCKS[args.clock],
        )
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

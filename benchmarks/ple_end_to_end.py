"""End-to-end tokens/s per PLE residency on a qwen4_exp model (the second half of
``benchmarks/ple_delivery.py``, which imports it).

Makes a random Qwen3.8-Flash-Next (qwen4_exp) model whose two PLE layers' n-gram tables
together take ``--e2e-table-mib`` (fp32 rows of 64 values), writes the tables as a table
folder beside it, and serves the same greedy workload through the real engine (Helios, the
prepared programs, the worker's delivery) at each residency: ``device`` (the programs gather
from the model's own table), ``host`` (mapped; then preloaded), ``disk cold`` (page cache
dropped, empty row cache) and ``disk warm`` (the same workload again on the same store).
Retention is off, so a warm run computes what the cold one did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ignition.components.capacity import plan_catalog
from ignition.components.catalog import Catalog
from ignition.components.program_kinds import GraphKind
from ignition.model.families.qwen4_exp import QWEN4_EXP
from ignition.model.weights import random_model
from ignition.recipes import LoadOptions, get_recipe
from ignition.runtime.assembly import RuntimeOptions, assemble_engine
from ignition.runtime.ple.delivery import PleOptions, open_ple
from ignition.runtime.ple.model import context_size, eos_id, model_row_ids, write_model_table
from ignition.runtime.ple.table import read_layout
from ignition.runtime.requests.request import GenerationRequest, SamplingParams

EOS = 2
HEAD_DIM = 64  # ple_embed_dim 256 over 4 hashed heads


def model_config(table_mib: int) -> dict:
    """A small qwen4_exp text config whose PLE tables take about ``table_mib`` MiB (fp32)."""
    rows_per_head = table_mib * (1 << 20) // (HEAD_DIM * 4) // 8  # 2 layers x 4 heads
    return {
        "model_type": "qwen4_exp_text", "vocab_size": 4096, "hidden_size": 64,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "layer_types": ["linear_attention"] * 3 + ["indexed_attention"],
        "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64, "output_gate_type": "sigmoid", "hc_count": 4,
        "hc_lowrank": 8, "ple_layer_ids": [1, 3], "ple_embed_dim": 4 * HEAD_DIM,
        "ple_conv_kernel_size": 3, "ngram_size": 3, "heads_per_ngram": 2,
        "ngram_vocab_size_base": rows_per_head, "make_ngram_vocab_size_divisible_by": 128,
        "seed": 11, "split_ngram_parts": 4, "indexer_n_heads": 4, "indexer_kv_heads": 1,
        "indexer_head_dim": 16, "indexer_budget": 64, "indexer_compress_ratio": 4,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "eos_token_id": EOS,
        "dtype": "float32",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                            "partial_rotary_factor": 0.5},
    }  # fmt: skip


class _Decoder:
    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(0x4E00 + i) for i in ids)


@dataclass
class EndToEnd:
    label: str
    generated_per_s: float
    tokens_per_s: float  # prompt + generated
    exposed_us_per_frame: float
    frames: int
    hit_rate: float | None
    outputs: dict


def workload(num_requests: int, prompt_len: int) -> list[tuple[str, tuple[int, ...]]]:
    return [
        (f"r{r}", tuple((37 * i + 101 * r) % 4000 + 4 for i in range(prompt_len)))
        for r in range(num_requests)
    ]


def serve_once(engine, requests, max_tokens: int) -> tuple[float, dict]:
    outputs: dict[str, list[int]] = {name: [] for name, _ in requests}
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    began = time.perf_counter()
    for name, prompt in requests:
        sink = lambda chunk, name=name: outputs[name].extend(chunk.token_ids)  # noqa: E731
        engine.submit(GenerationRequest(name, prompt, sampling), sink)
    engine.run_until_idle()
    return time.perf_counter() - began, outputs


def run_end_to_end(folder: Path, args, drop_page_cache) -> list[EndToEnd]:
    torch.manual_seed(0)
    config = QWEN4_EXP.parse_config(model_config(args.e2e_table_mib), "benchmark", frozenset())
    model = random_model(config, seed=0)
    layout = write_model_table(model, folder / "ngram_table")
    print(
        f"\nend to end: qwen4_exp model ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M "
        f"parameters), n-gram tables {layout.table_bytes / 2**20:.0f} MiB "
        f"({layout.num_rows} rows x {layout.row_width} fp32, 2 PLE layers, "
        f"{len(layout.pieces)} shards); {args.e2e_requests} requests x {args.e2e_prompt} "
        f"prompt + {args.e2e_tokens} generated tokens, greedy, speculation off, "
        f"{args.threads} torch threads"
    )
    load = LoadOptions(mixed_prefill=True, max_prefill_chunk=128)
    full = plan_catalog(get_recipe("qwen4-exp"), load)
    text_only = tuple(d for d in full.descriptors if d.kind is not GraphKind.VISION)
    catalog = Catalog(full.recipe, full.options, text_only)
    options = RuntimeOptions(num_slots=4, page_size=64, max_context_tokens=1024,
                             speculation="off", snapshot_rows=0)  # fmt: skip
    requests = workload(args.e2e_requests, args.e2e_prompt)
    total = args.e2e_requests * (args.e2e_prompt + args.e2e_tokens)
    generated = args.e2e_requests * args.e2e_tokens
    cases = [("device", "device", {}, False), ("host", "host", {}, False),
             ("host+preload", "host", {"preload": True}, False),
             ("disk cold", "disk", {}, True), ("disk warm", "disk", {}, False)]  # fmt: skip
    warmup = assemble_engine(model, catalog, _Decoder(), [EOS], options)
    serve_once(warmup, requests, args.e2e_tokens)  # first-call costs off the clock
    best: dict[str, EndToEnd] = {}
    for _ in range(args.e2e_repeats):  # the shared machine's noise: keep each case's best
        for r in _one_pass(folder, model, catalog, options, requests, cases, layout, args,
                           drop_page_cache, total, generated):  # fmt: skip
            if r.label not in best or r.tokens_per_s > best[r.label].tokens_per_s:
                best[r.label] = r
    return [best[label] for label, *_ in cases]


def _one_pass(folder, model, catalog, options, requests, cases, layout, args, drop_page_cache,
              total, generated) -> list[EndToEnd]:  # fmt: skip
    results, disk_runtime = [], None
    for label, residency, extra, cold in cases:
        engine = assemble_engine(model, catalog, _Decoder(), [EOS], options)
        if label == "disk warm" and disk_runtime is not None:
            runtime = disk_runtime  # the same store: its row cache holds the cold run's rows
            engine.worker.attach_ple(disk_runtime.delivery)
        else:
            if cold:
                drop_page_cache(folder / "ngram_table")
            runtime = open_ple(
                folder, PleOptions(residency, **extra), torch.device("cpu"), engine.worker,
                model_row_ids(model), context_size(model), eos_id(model),
                read_layout(layout.folder),
            )  # fmt: skip
        before = runtime.stats.snapshot()
        seconds, outputs = serve_once(engine, requests, args.e2e_tokens)
        after = runtime.stats.snapshot()
        frames = after.frames - before.frames
        hits = after.cache_hits - before.cache_hits
        misses = after.cache_misses - before.cache_misses
        results.append(EndToEnd(
            label, generated / seconds, total / seconds,
            (after.exposed_ns - before.exposed_ns) / max(frames, 1) / 1e3, frames,
            hits / (hits + misses) if hits + misses else None, outputs,
        ))  # fmt: skip
        if residency == "disk":
            disk_runtime = runtime
    if disk_runtime is not None and disk_runtime.mailbox is not None:
        disk_runtime.mailbox.close()
    return results


def print_end_to_end(results: list[EndToEnd]) -> None:
    device = results[0]
    print(
        "| residency | generated tok/s | tok/s (prompt + generated) | exposed us/frame "
        "| delivered frames | cache hit rate | tok/s, device / this | greedy = device |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        hit = "-" if r.hit_rate is None else f"{r.hit_rate:.2f}"
        print(
            f"| {r.label} | {r.generated_per_s:,.1f} | {r.tokens_per_s:,.1f} | "
            f"{r.exposed_us_per_frame:,.1f} | {r.frames} | {hit} | "
            f"{device.tokens_per_s / r.tokens_per_s:.2f} | {r.outputs == device.outputs} |"
        )

"""The GPU check: one prepared run for a lent H200, one table at the end.

    bash scripts/gpu_check.sh             # on the GPU machine (under 8 minutes)
    bash scripts/gpu_check.sh --dry-run   # on CPU: the same plumbing at tiny sizes (CI)

Sections (each row: check | result | detail):

1. kernels: every Triton kernel against its PyTorch reference at full-size head dims
   (max |error|, milliseconds, and % of the 4.3 TB/s HBM roofline from the bytes its
   operands occupy), plus the MoE fixed-capacity grouped GEMM in bf16;
2. capture: every program of the qwen38 ``--mixed-prefill`` catalog over the embedded
   checkpoint, captured largest first into one pool: seconds and pool growth per program;
3. replay: each captured program validated (every row active, real tokens, outputs and
   state lengths checked) with its replay under ``torch.cuda.set_sync_debug_mode("error")``
   (any implicit host sync raises);
4. overlap: during a decode run, how much host planning happened while a frame was queued
   on the device (the overlap ratio), and device busy time over wall time;
5. greedy: the same prompt generates identical greedy tokens with speculation off, fixed
   and adaptive, all on captured graphs; its prompt logprobs (scored from the hidden states
   the captured programs keep) agree across the three modes and with an eager forward;
6. ple: the n-gram table off the device (``scripts/gpu_check_ple.py``): the UVA gather from
   a pinned host table equals the reference, and a host thread delayed by a known amount
   shows up in a captured graph's replay interval and in the answer's ``ready - needed``;
   a tiny qwen4_exp generates the same greedy tokens at device, host+preload and disk;
7. qsa: QSA's indexer and sparse attention at 8k / 32k / 128k context, decode at batch 1 and
   32 and prefill chunks of 2048 (``scripts/gpu_check_qsa.py``): milliseconds and share of
   the HBM roofline on Triton, against the references and dense paged attention; FP8 index
   keys (their scores, and greedy tokens of the embedded model served with
   ``indexer_kv_dtype="fp8"`` on captured graphs against its own dtype), the block-key
   compression, and the decode path captured and replayed.

The dry run replaces what needs CUDA with its CPU counterpart (reference kernels timed on
CPU, eager programs, the host-sync detector instead of the sync debug mode) and fails if
any row is missing or errored, so CI keeps the script runnable before a GPU is lent.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.kernels_cpu import SCALES, Dims, benchmarks, max_error
from ignition.compiler.build import DEFAULT_CHECKPOINT, _sample_tokens
from ignition.compiler.graph import prepare_programs
from ignition.compiler.host_sync import HostSyncDetector
from ignition.compiler.validate import validate_program
from ignition.components.capacity import plan_catalog
from ignition.kernels import ops, use_backend
from ignition.model.state import ModelState
from ignition.model.weights import load_model
from ignition.recipes import LoadOptions, get_recipe
from scripts.gpu_check_ple import check_ple, check_ple_greedy
from scripts.gpu_check_qsa import check_qsa
from scripts.gpu_check_qsa_kernels import check_qsa_kernels

HBM_BYTES_PER_S = 4.3e12  # H200 HBM3e
FULL = Dims(16, 2, 256, 16, 128, 128, 151936)  # full-size head dims, Qwen-scale vocabulary
ERROR_LIMIT = 5e-2  # fp32 kernels vs fp32 references; bf16 MoE rows use their own
PROMPT = "def parse_args(argv):\n    "


@dataclass
class Row:
    section: str
    check: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Setup:
    device: torch.device
    dry_run: bool
    dims: Dims
    catalog_options: LoadOptions  # the capture section's catalog
    greedy_options: LoadOptions  # the catalog the engines of sections 4-5 serve
    max_tokens: int


def setup_for(dry_run: bool) -> Setup:
    if dry_run:
        small = LoadOptions(mixed_prefill=True, max_prefill_chunk=64)
        return Setup(torch.device("cpu"), True, SCALES["tiny"], small, small, 8)
    return Setup(
        torch.device("cuda"),
        False,
        FULL,
        LoadOptions(mixed_prefill=True),
        LoadOptions(mixed_prefill=True, max_prefill_chunk=256),
        48,
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(call: Callable[[], object], device: torch.device, repeats: int = 10) -> float:
    call()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        synchronize(device)
        samples.append((time.perf_counter() - began) * 1e3)
    return statistics.median(samples)


def operand_bytes(args: tuple[object, ...], result: object) -> int:
    """Bytes of every tensor operand and result once: the traffic floor of the op."""
    total = 0
    for item in (*args, *(result if isinstance(result, tuple | list) else (result,))):
        if isinstance(item, torch.Tensor):
            total += item.numel() * item.element_size()
    return total


@contextlib.contextmanager
def no_implicit_sync(s: Setup, where: str) -> Iterator[None]:
    """CUDA: the sync debug mode raises on implicit syncs; CPU: the host-sync detector."""
    if s.device.type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")
    else:
        with HostSyncDetector(where):
            yield


def check_kernels(s: Setup) -> list[Row]:
    rows = []
    backend = "reference" if s.dry_run else "triton"
    torch.manual_seed(0)
    with torch.inference_mode():
        for name, (op_name, args) in benchmarks(s.dims, s.device).items():
            op = getattr(ops, op_name)
            with use_backend("reference"):
                want = op(*args)
            with use_backend(backend):
                got = op(*args)
                ms = median_ms(lambda op=op, a=args: op(*a), s.device)
            error = max_error(got, want)
            share = operand_bytes(args, got) / (ms / 1e3) / HBM_BYTES_PER_S * 100
            detail = f"err {error:.1e}  {ms:.3f} ms  {share:.1f}% of 4.3 TB/s"
            rows.append(Row("kernels", name, error <= ERROR_LIMIT, detail))
    rows.append(check_moe_grouped(s))
    return rows


def check_moe_grouped(s: Setup) -> Row:
    from ignition.model.config import ModelConfig
    from ignition.model.layers.moe import MixtureOfExperts

    dtype = torch.float32 if s.dry_run else torch.bfloat16
    hidden, inter = (128, 128) if s.dry_run else (2048, 512)
    config = ModelConfig.tiny(
        hidden_size=hidden, moe_intermediate_size=inter, num_experts=64, num_experts_per_tok=8
    )
    torch.manual_seed(0)
    moe = MixtureOfExperts(config).to(s.device, dtype).eval()
    x = torch.randn(512, hidden, device=s.device, dtype=dtype)
    with torch.no_grad():
        if not moe.can_dispatch_grouped(x):
            return Row("kernels", "MoE fixed-capacity grouped GEMM", False, "not dispatchable")
        want = moe.routed_host_grouped(x)
        got = moe.routed_fixed_capacity(x)  # also the warm-up: stacks the expert weights
        captured = capture_or_detect(s, lambda: moe.routed_fixed_capacity(x), "moe")
        error = max(float((got - want).abs().max()), float((captured - want).abs().max()))
        ms = median_ms(lambda: moe.routed_fixed_capacity(x), s.device)
    limit = 1e-4 if dtype == torch.float32 else 5e-2
    detail = f"err {error:.1e}  {ms:.3f} ms  ({dtype}, 512 tokens, 64 experts top 8, "
    detail += "captured + replayed)" if s.device.type == "cuda" else "host-sync detector)"
    return Row("kernels", "MoE fixed-capacity grouped GEMM", error <= limit, detail)


def capture_or_detect(s: Setup, fn: Callable[[], torch.Tensor], where: str) -> torch.Tensor:
    """CUDA: capture ``fn`` in a graph and replay it under the sync debug mode; CPU: run it
    under the host-sync detector. Returns the output."""
    if s.device.type != "cuda":
        with HostSyncDetector(where):
            return fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    with no_implicit_sync(s, where):
        graph.replay()
    synchronize(s.device)
    return out


def _validation_state(model, descriptors, device) -> ModelState:
    page = 64
    slots = max(2, max(d.batch_capacity for d in descriptors))
    tokens = max(d.max_packed_extent + d.token_capacity + d.proposal_depth + 1 for d in descriptors)
    per_slot = -(-tokens // page)
    dtype = next(model.parameters()).dtype
    return ModelState.allocate(
        model.config, slots, per_slot * slots + 1, page, per_slot, device=device, dtype=dtype
    )


def check_capture_and_replay(s: Setup, model) -> list[Row]:
    catalog = plan_catalog(get_recipe("qwen38"), s.catalog_options)
    state = _validation_state(model, catalog.descriptors, s.device)
    rows: list[Row] = []

    def prepared(d, program) -> None:
        mib = program.capture_bytes / 2**20
        detail = f"{program.capture_s:.2f} s  {mib:.1f} MiB pool growth"
        rows.append(Row("capture", d.name, program.is_captured or s.dry_run, detail))

    began = time.perf_counter()
    programs, pending = prepare_programs(
        model, state, catalog.descriptors, s.device, on_prepared=prepared
    )
    total = f"{len(programs)} programs in {time.perf_counter() - began:.1f} s"
    pool = torch.cuda.memory_reserved(s.device) / 2**20 if s.device.type == "cuda" else 0.0
    rows.append(Row("capture", "whole catalog", len(programs) == len(catalog.descriptors),
                    f"{total}, {pool:.0f} MiB reserved"))  # fmt: skip
    failures = []
    sample = _sample_tokens(DEFAULT_CHECKPOINT)
    with torch.no_grad():
        for name, (program, graph) in programs.items():
            run = graph.run

            def checked_run(needs_logprobs=True, *, run=run, name=name):
                with no_implicit_sync(s, name):
                    return run(needs_logprobs)

            graph.run = checked_run  # every row active, real tokens, outputs checked
            try:
                validate_program(program, graph, state, pending, sample, model.config.vocab_size)
            except Exception as err:  # a sync inside a replay: report it, keep checking
                failures.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0]}")
            finally:
                graph.run = run
    detail = "none" if not failures else "; ".join(failures[:3])
    rows.append(Row("replay", f"{len(programs)} validated replays", not failures, detail))
    return rows


def _engine(s: Setup, model, speculation: str, indexer_kv_dtype: str = "auto"):
    from ignition.runtime.assembly import RuntimeOptions, assemble_engine

    class Ids:
        def decode(self, ids, skip_special_tokens: bool = True) -> str:
            return "".join(chr(0x4E00 + i) for i in ids)

    catalog = plan_catalog(get_recipe("qwen38"), s.greedy_options)
    options = RuntimeOptions(num_slots=4, page_size=64, max_context_tokens=1024,
                             speculation=speculation, mixed=True,
                             indexer_kv_dtype=indexer_kv_dtype)  # fmt: skip
    return assemble_engine(model, catalog, Ids(), [], options)


def _generate(engine, prompt_ids: list[int], max_tokens: int, num_requests: int = 1):
    from ignition.runtime.requests.request import GenerationRequest, SamplingParams

    outputs: dict[str, list[int]] = {}
    for i in range(num_requests):
        outputs[f"r{i}"] = []
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        sink = outputs[f"r{i}"].extend
        engine.submit(GenerationRequest(f"r{i}", tuple(prompt_ids), sampling),
                      lambda chunk, sink=sink: sink(chunk.token_ids))  # fmt: skip
    engine.run_until_idle(max_steps=100_000)
    return outputs


def check_overlap(s: Setup, model, prompt_ids: list[int]) -> list[Row]:
    engine = _engine(s, model, "off")
    plan, launch = engine.scheduler.plan, engine.worker.launch
    host = {"queued": 0.0, "alone": 0.0}
    device_ns: list[int] = []

    def timed_plan():
        began = time.perf_counter()
        chosen = plan()
        host["queued" if engine._inflight else "alone"] += time.perf_counter() - began
        return chosen

    def checked_launch(p, fence, live):
        began = time.perf_counter()
        queued = bool(engine._inflight)
        with no_implicit_sync(s, f"launch {p.descriptor.name}"):
            out = launch(p, fence, live)
        host["queued" if queued else "alone"] += time.perf_counter() - began
        return out

    engine.scheduler.plan, engine.worker.launch = timed_plan, checked_launch
    engine.frame_listeners.append(lambda p, r: device_ns.append(r.timing.device_ns))
    _generate(engine, prompt_ids, s.max_tokens, num_requests=1)  # warm-up: first launches
    host.update(queued=0.0, alone=0.0)
    device_ns.clear()
    began = time.perf_counter()
    _generate(engine, prompt_ids, s.max_tokens, num_requests=2)
    wall = time.perf_counter() - began
    total = host["queued"] + host["alone"]
    ratio = host["queued"] / total if total else 0.0
    busy = sum(device_ns) / 1e9 / wall if wall else 0.0
    return [
        Row("overlap", "host planning behind queued frames", total > 0,
            f"overlap ratio {ratio:.0%} of {total * 1e3:.1f} ms host plan+launch"),
        Row("overlap", "device busy / wall during decode", bool(device_ns),
            f"{busy:.0%} over {len(device_ns)} frames, {wall:.2f} s"),
    ]  # fmt: skip


def _prompt_logprobs(engine, prompt_ids: list[int]) -> list[float]:
    from ignition.runtime.requests.request import GenerationRequest, SamplingParams

    chunks: list = []
    sampling = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True, prompt_logprobs=1)
    engine.submit(GenerationRequest("scored", tuple(prompt_ids), sampling), chunks.append)
    engine.run_until_idle(max_steps=100_000)
    return [entry.logprob for entry in chunks[0].prompt_logprobs[1:]]


@torch.no_grad()
def _eager_prompt_logprobs(model, prompt_ids: list[int]) -> list[float]:
    from ignition.model.packing import PackedCapacity, PackedInputs
    from ignition.model.state import contiguous_pages

    weight = next(model.parameters())
    state = ModelState.allocate(model.config, 1, 16, 64, 16, weight.device, weight.dtype)
    contiguous_pages(state)
    device = weight.device
    capacity = PackedCapacity.mixed(1, 1, len(prompt_ids))
    inputs = PackedInputs.build(capacity, [prompt_ids], [0], prefill_row=0, device=device)
    out = model.forward_packed(inputs, capacity, state)
    logprobs = torch.log_softmax(out.logits[: len(prompt_ids) - 1].float(), dim=-1)
    targets = torch.tensor(prompt_ids[1:], device=device)
    return logprobs.gather(-1, targets[:, None]).squeeze(-1).tolist()


def check_greedy(s: Setup, model, prompt_ids: list[int]) -> list[Row]:
    tokens, scored = {}, {}
    for mode in ("off", "fixed", "adaptive"):
        engine = _engine(s, model, mode)
        tokens[mode] = _generate(engine, prompt_ids, s.max_tokens)["r0"]
        scored[mode] = _prompt_logprobs(engine, prompt_ids)
        del engine
    same = tokens["off"] == tokens["fixed"] == tokens["adaptive"] and tokens["off"]
    detail = f"{len(tokens['off'])} tokens" if same else "; ".join(
        f"{m}: {t[:8]}" for m, t in tokens.items()
    )  # fmt: skip
    eager = _eager_prompt_logprobs(model, prompt_ids)
    error = max(abs(a - b) for values in scored.values() for a, b in zip(values, eager,
                                                                         strict=True))  # fmt: skip
    return [
        Row("greedy", "off == fixed == adaptive (captured)", bool(same), detail),
        Row("greedy", "prompt logprobs (captured) == eager", error < ERROR_LIMIT,
            f"{len(eager)} positions, max |error| {error:.2e} over 3 modes"),
    ]  # fmt: skip


def check_fp8_index_keys_greedy(s: Setup, model, prompt_ids: list[int]) -> list[Row]:
    """``--indexer-kv-dtype fp8`` through the serving start-up (``RuntimeOptions`` -> the
    state) on captured graphs: the state holds e4m3 block keys, the programs score them
    (Triton on the GPU) and a prompt past the index budget generates its greedy tokens,
    compared with keys in the model's dtype (measured: FP8 may flip a close block choice)."""
    budget = model.config.qsa_indexer.budget
    repeats = -(-(budget + 16) // len(prompt_ids))
    prompt = (prompt_ids * repeats)[: budget + 16]
    tokens, key_bytes, dtypes = {}, {}, {}
    for dtype in ("auto", "fp8"):
        engine = _engine(s, model, "adaptive", dtype)
        keys = engine.worker.state.index_keys
        dtypes[dtype], key_bytes[dtype] = keys.dtype, keys.numel() * keys.element_size()
        tokens[dtype] = _generate(engine, prompt, s.max_tokens)["r0"]
        del engine
    same = next(
        (i for i, (a, b) in enumerate(zip(tokens["fp8"], tokens["auto"], strict=True)) if a != b),
        len(tokens["fp8"]),
    )
    ok = dtypes["fp8"] == torch.float8_e4m3fn and len(tokens["fp8"]) == s.max_tokens
    detail = (
        f"{same}/{len(tokens['fp8'])} greedy tokens before the first difference from "
        f"{dtypes['auto']} keys ({len(prompt)}-token prompt, budget {budget}); index keys "
        f"{key_bytes['fp8'] / 2**20:.2f} MiB vs {key_bytes['auto'] / 2**20:.2f} MiB"
    )
    return [Row("qsa", "fp8 index keys: greedy, captured (adaptive)", ok, detail)]


def run_checks(s: Setup) -> list[Row]:
    from tokenizers import Tokenizer

    rows: list[Row] = []

    def section(name: str, fn: Callable[[], list[Row]]) -> None:
        try:
            rows.extend(fn())
        except Exception as err:
            traceback.print_exc()
            rows.append(Row(name, "section", False, f"{type(err).__name__}: {err}"))

    section("kernels", lambda: check_kernels(s))
    section("ple", lambda: check_ple(s, Row))
    section("ple", lambda: check_ple_greedy(s, Row))
    section("qsa", lambda: check_qsa(s, Row, median_ms))
    section("qsa", lambda: check_qsa_kernels(s, Row, median_ms))
    model = load_model(DEFAULT_CHECKPOINT, s.device)
    tokenizer = Tokenizer.from_file(str(DEFAULT_CHECKPOINT / "tokenizer.json"))
    prompt_ids = tokenizer.encode(PROMPT).ids
    section("capture", lambda: check_capture_and_replay(s, model))
    section("overlap", lambda: check_overlap(s, model, prompt_ids))
    section("greedy", lambda: check_greedy(s, model, prompt_ids))
    section("qsa", lambda: check_fp8_index_keys_greedy(s, model, prompt_ids))
    return rows


def print_table(rows: list[Row]) -> None:
    width = max(len(r.check) for r in rows)
    print(f"{'section':<8} | {'check':<{width}} | result | detail")
    for r in rows:
        print(f"{r.section:<8} | {r.check:<{width}} | {'pass' if r.ok else 'FAIL':<6} | {r.detail}")


EXPECTED_SECTIONS = ("kernels", "capture", "replay", "overlap", "greedy", "ple", "qsa")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU: check the plumbing")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run to check the plumbing on CPU")
        return 2
    torch.set_num_threads(1 if args.dry_run else torch.get_num_threads())
    began = time.perf_counter()
    rows = run_checks(setup_for(args.dry_run))
    missing = [name for name in EXPECTED_SECTIONS if not any(r.section == name for r in rows)]
    rows.extend(Row(name, "section", False, "no rows") for name in missing)
    if not args.dry_run:
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print_table(rows)
    print(f"total {time.perf_counter() - began:.0f} s, {sum(not r.ok for r in rows)} failed")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Time the kernel ops at serving-like shapes: the references on CPU (the CPU serving path).

Run: ``python benchmarks/kernels_cpu.py [--threads N] [--scale tiny|small] [--device cuda]``.
Prints the median milliseconds per call of each op for a 512-token prompt row and for
decode/verify rows at batch 1 and 4. ``tiny`` uses the embedded tiny checkpoint's dimensions,
``small`` real head sizes. With ``--device cuda`` it also times the Triton kernels and prints
their largest difference from the reference. Not a test: nothing is asserted. On a shared
machine pass ``--threads 1``: oversubscribed threads make CPU timings meaningless.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ignition.kernels import ops, use_backend


@dataclass(frozen=True)
class Dims:
    num_heads: int
    num_kv_heads: int
    head_dim: int
    gdn_heads: int
    key_dim: int
    value_dim: int
    vocab: int


SCALES = {
    "tiny": Dims(4, 2, 16, 2, 16, 16, 128),
    "small": Dims(16, 2, 128, 16, 128, 128, 4096),
}
PROMPT_TOKENS = 512
PAGE_SIZE = 16
WIDTH = 4  # verify width (pending token + 3 drafts)


def median_ms(call: Callable[[], object], repeats: int = 20) -> float:
    call()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def attention_inputs(dims: Dims, rows: list[tuple[int, int]]):
    max_pages = -(-max(c + n for c, n in rows) // PAGE_SIZE)
    num_pages = len(rows) * max_pages
    cache_shape = (num_pages, PAGE_SIZE, dims.num_kv_heads, dims.head_dim)
    q = torch.randn(sum(n for _, n in rows), dims.num_heads, dims.head_dim)
    page_table = torch.arange(num_pages, dtype=torch.int32).reshape(len(rows), max_pages)
    cu = torch.tensor([0] + [n for _, n in rows]).cumsum(0).to(torch.int32)
    context = torch.tensor([c + n for c, n in rows], dtype=torch.int32)
    return q, torch.randn(cache_shape), torch.randn(cache_shape), page_table, cu, context


def gdn_inputs(dims: Dims, leading: tuple[int, ...]):
    shape = (*leading, dims.gdn_heads)
    q = F.normalize(torch.randn(*shape, dims.key_dim), dim=-1)
    k = F.normalize(torch.randn(*shape, dims.key_dim), dim=-1)
    v = torch.randn(*shape, dims.value_dim)
    g = -F.softplus(torch.randn(shape))
    beta = torch.sigmoid(torch.randn(shape))
    return q, k, v, g, beta


def benchmarks(dims: Dims, device: torch.device) -> dict[str, tuple[str, tuple[object, ...]]]:
    """name -> (op name, positional arguments on ``device``)."""
    cases: dict[str, tuple[str, tuple[object, ...]]] = {}
    scale = dims.head_dim**-0.5
    prompt = attention_inputs(dims, [(0, PROMPT_TOKENS)])
    cases["paged attention, 512-token prompt"] = ("packed_paged_attention", (*prompt, scale))
    mixed = attention_inputs(dims, [(0, PROMPT_TOKENS)] + [(700, WIDTH)] * 3)
    cases["paged attention, prompt + 3 verify rows"] = ("packed_paged_attention", (*mixed, scale))
    for batch in (1, 4):
        decode = attention_inputs(dims, [(700, 1)] * batch)
        cases[f"paged attention, decode batch {batch}"] = (
            "packed_paged_attention", (*decode, scale)
        )  # fmt: skip
    _, k_cache, v_cache, *_ = prompt
    new_kv = torch.randn(PROMPT_TOKENS, dims.num_kv_heads, dims.head_dim)
    slots = torch.arange(PROMPT_TOKENS, dtype=torch.int32)
    cases["write_paged_kv, 512 tokens"] = (
        "write_paged_kv", (new_kv, new_kv, k_cache.clone(), v_cache.clone(), slots)
    )  # fmt: skip

    gdn_scale = dims.key_dim**-0.5
    state = torch.zeros(dims.gdn_heads, dims.key_dim, dims.value_dim)
    chunk = gdn_inputs(dims, (PROMPT_TOKENS,))
    cases["chunked GDN, 512-token prompt"] = ("chunk_gated_delta_rule", (*chunk, state, gdn_scale))
    for batch in (1, 4):
        states = torch.zeros(batch, dims.gdn_heads, dims.key_dim, dims.value_dim)
        cases[f"recurrent GDN, batch {batch} x W {WIDTH}"] = (
            "recurrent_gated_delta_rule", (*gdn_inputs(dims, (batch, WIDTH)), states, gdn_scale)
        )  # fmt: skip

    channels = dims.gdn_heads * (2 * dims.key_dim + dims.value_dim)
    weight = torch.randn(channels, 4)
    length = torch.tensor([PROMPT_TOKENS], dtype=torch.int32)
    cases["conv1d prefill, 512 tokens"] = (
        "causal_conv1d_prefill",
        (torch.randn(PROMPT_TOKENS, channels), weight, None, torch.zeros(channels, 3), length),
    )
    cases[f"conv1d update, batch 4 x W {WIDTH}"] = (
        "causal_conv1d_update",
        (torch.randn(4, WIDTH, channels), weight, None, torch.zeros(4, channels, 3)),
    )

    depth, batch = WIDTH - 1, 4
    ceilings = torch.full((batch,), WIDTH, dtype=torch.int32)
    cases["allocation, 4 lanes x D 3"] = (
        "allocate_speculative_prefixes", (torch.rand(batch, depth), ceilings, batch * 2)
    )  # fmt: skip
    draft = torch.softmax(torch.randn(batch, depth, dims.vocab), -1)
    target = torch.softmax(torch.randn(batch, WIDTH, dims.vocab), -1)
    verify_args = (
        draft.argmax(-1), draft, target, torch.full((batch,), WIDTH, dtype=torch.int32),
        torch.rand(batch, WIDTH), torch.empty(batch, dims.vocab).exponential_(),
    )  # fmt: skip
    cases["rejection verify, sampled, 4 rows"] = ("rejection_verify", (*verify_args, False))
    return {
        name: (op, tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args))
        for name, (op, args) in cases.items()
    }


def max_error(first: object, second: object) -> float:
    """Largest absolute difference over the (possibly nested) tensor outputs; 0 for None."""
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):
        return float((first.double() - second.double()).abs().max()) if first.numel() else 0.0
    if isinstance(first, tuple | list) and isinstance(second, tuple | list):
        return max((max_error(a, b) for a, b in zip(first, second, strict=True)), default=0.0)
    return 0.0


def timed(call: Callable[[], object], device: torch.device) -> float:
    if device.type != "cuda":
        return median_ms(call)
    torch.cuda.synchronize()
    return median_ms(lambda: (call(), torch.cuda.synchronize()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--scale", choices=sorted(SCALES), default="tiny")
    parser.add_argument("--device", default="cpu", help="cuda: also time Triton and compare")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    backends = ["reference", "triton"] if device.type == "cuda" else ["reference"]
    print(f"kernels on {device}, {args.scale} dims, {torch.get_num_threads()} CPU threads")
    print(f"{'case':<42}" + "".join(f"{b + ' ms':>14}" for b in backends) + "   max |diff|")
    with torch.inference_mode():
        for name, (op_name, op_args) in benchmarks(SCALES[args.scale], device).items():
            op = getattr(ops, op_name)
            results, columns = [], []
            for backend in backends:
                with use_backend(backend):
                    results.append(op(*op_args))
                    columns.append(timed(lambda op=op, a=op_args: op(*a), device))
            error = max_error(results[0], results[-1]) if len(results) > 1 else 0.0
            print(f"{name:<42}" + "".join(f"{ms:14.3f}" for ms in columns) + f"   {error:.2e}")


if __name__ == "__main__":
    main()

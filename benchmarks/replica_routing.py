"""Data-parallel replicas on this machine (a benchmark, issue 42): throughput and p99 time
to first token of 1 vs 2 replicas, and the prefix-hit rate of affinity routing against
round-robin on a multi-turn chat workload.

    PYTHONPATH=. .venv/bin/python benchmarks/replica_routing.py --bundle BUNDLE

BUNDLE: the embedded default built once (`ignition build --weights
ignition/assets/qwen38-tiny --out /tmp/qwen38-tiny --device cpu`). Each configuration gets
fresh replicas (empty caches) on one local Ray cluster; every replica runs torch on one
thread. Times are HTTP arrival times through Ray Serve's proxy, not device timings; on a
shared 2-core machine they move with whatever else runs. Nothing here is asserted.
The tables measured on the development machine are in docs/scaling.md, "Measurements".
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import ray
from ray import serve

from ignition.replicas import launch
from ignition.serving.engine import ServeOptions

PORT = 18742
URL = f"http://127.0.0.1:{PORT}"
CODE = "def handler(request):\n    return request.args\n"


def _stream(path: str, body: dict) -> dict:
    """One streamed request: time to first token, output tokens, cached prompt tokens."""
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    began, first, usage, text = time.perf_counter(), None, {}, ""
    with httpx.stream("POST", f"{URL}{path}", json=body, timeout=600) as r:
        r.raise_for_status()
        replica = r.headers.get("x-ignition-replica")
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            for choice in event.get("choices", []):
                piece = choice.get("text") or choice.get("delta", {}).get("content") or ""
                if piece and first is None:
                    first = time.perf_counter() - began
                text += piece
    details = usage.get("prompt_tokens_details") or {}
    return {"ttft_s": first or 0.0, "tokens": usage.get("completion_tokens", 0), "text": text,
            "cached": details.get("cached_tokens", 0), "prompt": usage.get("prompt_tokens", 0),
            "replica": replica}  # fmt: skip


def _deploy(options: ServeOptions, replicas: int, routing: str) -> None:
    plan = launch.ReplicaPlan(replicas, routing=routing)
    serve.run(launch.application(options, plan), name=launch.APP_NAME, route_prefix="/")


def throughput(requests: int, concurrency: int, max_tokens: int) -> dict:
    bodies = [{"prompt": f"{CODE}# request {i}\n", "max_tokens": max_tokens, "temperature": 0,
               "ignore_eos": True} for i in range(requests)]  # fmt: skip
    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        done = list(pool.map(lambda b: _stream("/v1/completions", b), bodies))
    wall = time.perf_counter() - began
    ttfts = sorted(d["ttft_s"] for d in done)
    return {"tok_per_s": sum(d["tokens"] for d in done) / wall,
            "p50_ttft_ms": 1000 * statistics.median(ttfts),
            "p99_ttft_ms": 1000 * ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))]}  # fmt: skip


def multi_turn(conversations: int, turns: int, max_tokens: int) -> dict:
    """Conversations advance one turn each in round-robin order (their turns interleave,
    as users' do); a later turn hits when its answer reports cached prompt tokens."""
    histories = [[{"role": "user", "content": CODE * 6 + f"Conversation {c}: explain."}]
                 for c in range(conversations)]  # fmt: skip
    later, hits, cached, prompt, stayed = 0, 0, 0, 0, 0
    last: list[str | None] = [None] * conversations
    for turn in range(turns):
        with ThreadPoolExecutor(2) as pool:
            bodies = [{"messages": h, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True} for h in histories]  # fmt: skip
            done = list(pool.map(lambda b: _stream("/v1/chat/completions", b), bodies))
        for c, (history, d) in enumerate(zip(histories, done)):
            if turn > 0:
                later += 1
                stayed += d["replica"] == last[c]
                hits += d["cached"] > 0
                cached += d["cached"]
                prompt += d["prompt"]
            last[c] = d["replica"]
            history += [{"role": "assistant", "content": d["text"]},
                        {"role": "user", "content": f"And then, turn {turn + 2}?"}]  # fmt: skip
    return {"hit_rate": hits / max(1, later), "cached_fraction": cached / max(1, prompt),
            "stayed": stayed / max(1, later)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--conversations", type=int, default=5)  # odd: no accidental stickiness
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--checkpoint-payoff", action="store_true",
                        help="keep retention's pay-off rule (default: every capture kept)")
    parser.add_argument("--extra-work-fraction", type=float, default=1.0,
                        help="retention's capture budget (serve's default 0.05 keeps few "
                        "message anchors on this CPU once snapshot costs are measured)")
    args = parser.parse_args()
    options = ServeOptions(artifacts=args.bundle, device="cpu", num_threads=1,
                           max_context_tokens=2048, checkpoint_payoff=args.checkpoint_payoff,
                           checkpoint_extra_work_fraction=args.extra_work_fraction)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": PORT})
    rows = []
    try:
        for replicas in () if args.skip_throughput else (1, 2):
            _deploy(options, replicas, "affinity")
            _stream("/v1/completions", {"prompt": "warm", "max_tokens": 2})
            rows.append((f"{replicas} replica(s)", throughput(args.requests, args.concurrency,
                                                             args.max_tokens)))
            serve.delete(launch.APP_NAME)
        hit_rows = []
        for routing in ("affinity", "round-robin"):
            _deploy(options, 2, routing)
            hit_rows.append((routing, multi_turn(args.conversations, args.turns, 8)))
            serve.delete(launch.APP_NAME)
    finally:
        launch.stop()
    print(f"\nthroughput: {args.requests} streamed completions x {args.max_tokens} tokens, "
          f"{args.concurrency} at a time")
    print("| replicas | output tok/s | p50 TTFT ms | p99 TTFT ms |\n|---|---|---|---|")
    for name, r in rows:
        ttft = f"{r['p50_ttft_ms']:.0f} | {r['p99_ttft_ms']:.0f}"
        print(f"| {name} | {r['tok_per_s']:.1f} | {ttft} |")
    print(f"\nprefix hits: {args.conversations} conversations x {args.turns} turns, 2 replicas")
    print("| routing | later turns on the previous turn's replica | later turns with cached "
          "tokens | cached / prompt tokens |\n|---|---|---|---|")
    for name, r in hit_rows:
        print(f"| {name} | {r['stayed']:.0%} | {r['hit_rate']:.0%} | {r['cached_fraction']:.0%} |")


if __name__ == "__main__":
    main()

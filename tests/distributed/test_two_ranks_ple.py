"""Issue 23 with tensor parallelism: the n-gram table is replicated, so every rank delivers
its own rows (its own store and mailbox; the loader reads no table on any rank), two ranks
with the table on host or disk produce one rank's greedy tokens with the table on the
device, every rank reporting its deliveries to rank zero (the stalls' aggregation is
tests/distributed/test_rank_checks.py's).

Budget: one qwen4_exp build (about 10 s) and, per residency, a one-rank run beside a
two-rank run (one spawned process), as tests/distributed/test_two_ranks.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ignition.distributed.launch import run_tensor_parallel
from ignition.runtime.ple.delivery import PleOptions
from ignition.runtime.requests.request import GenerationRequest, SamplingParams, StreamChunk
from ignition.serving.engine import ServeOptions, open_engine
from tests.distributed.test_two_ranks import NUM_TOKENS, PROMPTS, build

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen4_bundle(tmp_path_factory) -> Path:
    from tests.model.hf_checkpoints import write_qwen4_exp

    weights = tmp_path_factory.mktemp("qwen4-tp-weights")
    write_qwen4_exp(weights, seed=3, mtp=True)
    return build(tmp_path_factory.mktemp("qwen4-tp"), "--weights", str(weights))


def generate(options: ServeOptions, tp) -> dict:
    """Rank zero's side: every prompt at once; the tokens and (two ranks) the frames each
    rank delivered PLE rows for."""
    _bundle, engine = open_engine(options, tp=tp)
    chunks: dict[int, list[StreamChunk]] = {i: [] for i in range(len(PROMPTS))}
    sampling = SamplingParams(max_tokens=NUM_TOKENS, temperature=0.0, ignore_eos=True)
    for i, prompt in enumerate(PROMPTS):
        engine.submit(GenerationRequest(f"r{i}", prompt, sampling), chunks[i].append)
    engine.run_until_idle()
    return {
        "tokens": {i: [t for c in got for t in c.token_ids] for i, got in chunks.items()},
        "errors": [c.error for got in chunks.values() for c in got if c.error],
        "ple_frames": dict(getattr(engine.worker, "ple_frames", {})),
    }


@pytest.mark.parametrize("residency", ["host", "disk"])
def test_two_ranks_delivering_their_own_rows_reproduce_one_rank_on_the_device(
    qwen4_bundle, residency
):
    device = ServeOptions(str(qwen4_bundle), speculation="adaptive", device="cpu",
                          ple=PleOptions("device"))  # fmt: skip
    one = generate(device, None)
    off = ServeOptions(str(qwen4_bundle), speculation="adaptive", device="cpu",
                       ple=PleOptions(residency, cache_bytes=4096))  # fmt: skip
    two = run_tensor_parallel(2, off, generate, debug=True)
    assert two["errors"] == [] and two["tokens"] == one["tokens"]
    assert two["ple_frames"].get(0, 0) > 0 and two["ple_frames"].get(1, 0) > 0

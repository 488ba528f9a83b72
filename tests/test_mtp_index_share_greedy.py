"""A checkpoint whose config.json sets ``index_share_for_mtp_iteration`` (as the released
Qwen3.8-Flash-Next's does) is served with the MTP's later draft steps reusing the first
step's QSA selection; drafts change only acceptance, so greedy output past the index budget
is the same as without speculation."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

from ignition.cli import main
from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from ignition.serving.engine import ServeOptions, open_engine
from tests.checkpoints import VOCAB_SIZE, write_tiny_checkpoint

NUM_TOKENS = 24
PROMPT = torch.randint(9, VOCAB_SIZE, (120,), generator=torch.Generator().manual_seed(4)).tolist()


@pytest.fixture(scope="module")
def sharing_bundle(tmp_path_factory):
    weights = write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt"))
    raw = json.loads((weights / "config.json").read_text())
    raw["index_share_for_mtp_iteration"] = True
    (weights / "config.json").write_text(json.dumps(raw))
    out = tmp_path_factory.mktemp("bundle")
    args = ["build", "--weights", str(weights), "--out", str(out), "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--max-prefill-chunk", "64", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    return out


def greedy(bundle, speculation: str) -> list[int]:
    options = ServeOptions(artifacts=str(bundle), device="cpu", speculation=speculation)
    bundle, engine = open_engine(options)
    assert bundle.model.config.index_share_for_mtp_iteration
    tokens: list[int] = []
    sampling = SamplingParams(max_tokens=NUM_TOKENS, temperature=0.0, ignore_eos=True)
    request = GenerationRequest("r", tuple(PROMPT), sampling)
    engine.submit(request, lambda chunk: tokens.extend(chunk.token_ids))
    engine.run_until_idle()
    return tokens


def test_greedy_output_with_shared_draft_selections_equals_no_speculation(sharing_bundle):
    plain = greedy(sharing_bundle, "off")
    assert len(plain) == NUM_TOKENS
    assert greedy(sharing_bundle, "adaptive") == plain

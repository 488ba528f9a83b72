"""The checkpoint's ``index_share_for_mtp_iteration`` (Qwen3.8-Flash-Next's config.json, read
as vLLM reads it) decides whether the MTP's recursive draft steps reuse the round's first
draft step's QSA selection instead of scoring every block key again: off when the key is
absent. Within the index budget every position is selected, so the drafts coincide; past
it they may differ (drafts change acceptance only, never the verified output), and their
agreement is measured."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from ignition.kernels import ops
from ignition.model.config import ModelConfig
from ignition.model.config_error import ConfigError
from ignition.model.proposals import propose
from ignition.model.sampling import SamplingTensors
from ignition.model.weights import load_checkpoint, write_random_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import prefill

DEPTH = 4  # draft 1 from the kept MTP hidden, drafts 2..4 by recursive steps
MIN_SAME_DRAFTS = 0.75  # past the budget, drafts equal with and without reuse (measured 15/16)


def config_json(path) -> dict:
    return json.loads((path / "config.json").read_text())


def test_the_checkpoint_config_json_turns_sharing_on(tmp_path):
    on = write_random_checkpoint(
        tmp_path / "on", ModelConfig.tiny_flash_next(index_share_for_mtp_iteration=True)
    )
    assert config_json(on)["index_share_for_mtp_iteration"] is True
    assert load_checkpoint(on).model.config.index_share_for_mtp_iteration is True


def test_without_the_key_drafts_score_every_step(tmp_path):
    path = write_random_checkpoint(tmp_path / "off", ModelConfig.tiny_flash_next())
    raw = config_json(path)
    del raw["index_share_for_mtp_iteration"]
    (path / "config.json").write_text(json.dumps(raw))
    assert load_checkpoint(path).model.config.index_share_for_mtp_iteration is False


def test_a_value_that_is_not_a_bool_names_the_key(tmp_path):
    path = write_random_checkpoint(tmp_path / "bad", ModelConfig.tiny_flash_next())
    raw = config_json(path)
    raw["index_share_for_mtp_iteration"] = "yes"
    (path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="'index_share_for_mtp_iteration' = 'yes': expected bool"):
        load_checkpoint(path)


def drafts_of(model, prompt: list[int], share: bool, monkeypatch) -> tuple[torch.Tensor, int]:
    """(greedy drafts [1, DEPTH], block-scoring calls) of one round after ``prompt``."""
    monkeypatch.setattr(model, "config", replace(model.config, index_share_for_mtp_iteration=share))
    state = new_state(model.config)
    first = prefill(model, state, 0, prompt)
    calls = []
    original = ops.qsa_block_scores

    def counted(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(ops, "qsa_block_scores", counted)
    with torch.no_grad():
        drafts, _ = propose(
            model,
            state,
            torch.tensor([first]),
            torch.tensor([0], dtype=torch.int32),
            None,
            DEPTH,
            SamplingTensors.greedy(1),
            torch.tensor([len(prompt)]),
        )
    monkeypatch.setattr(ops, "qsa_block_scores", original)
    return drafts, len(calls)


def test_sharing_scores_the_blocks_once_per_round(qwen4_model, monkeypatch):
    prompt = [(37 * i + 11) % 4000 + 9 for i in range(21)]  # budget 8: blocks are chosen
    _, scored = drafts_of(qwen4_model, prompt, True, monkeypatch)
    _, rescored = drafts_of(qwen4_model, prompt, False, monkeypatch)
    assert (scored, rescored) == (1, DEPTH - 1)


def test_within_the_budget_the_drafts_coincide(qwen4_model, monkeypatch):
    prompt = [(37 * i + 11) % 4000 + 9 for i in range(4)]  # drafts at 4..7: budget 8
    shared, _ = drafts_of(qwen4_model, prompt, True, monkeypatch)
    scored, _ = drafts_of(qwen4_model, prompt, False, monkeypatch)
    assert torch.equal(shared, scored)


def test_past_the_budget_draft_agreement_is_measured(qwen4_model, monkeypatch):
    same = total = 0
    for seed in range(4):
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(9, 4000, (24 + 4 * seed,), generator=generator).tolist()
        shared, _ = drafts_of(qwen4_model, prompt, True, monkeypatch)
        scored, _ = drafts_of(qwen4_model, prompt, False, monkeypatch)
        same += int((shared == scored).sum())
        total += shared.numel()
    print(f"drafts with the first step's selection shared: {same}/{total} equal to rescored")
    assert same >= MIN_SAME_DRAFTS * total

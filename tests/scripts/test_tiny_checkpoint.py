"""The committed embedded default: it loads, writes Python and its MTP drafts get accepted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

import ignition
from ignition.kernels import use_backend
from ignition.model.weights import load_model
from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.data import encode_files
from scripts.tiny.evaluate import greedy_generate, held_out_prompts, measure_acceptance

ASSET = Path(ignition.__file__).parent / "assets" / "qwen38-tiny"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "README.md")
MAX_BYTES = 20_000_000
PROMPT = 'import os\n\n\ndef join(a, *p):\n    """Join two or more pathname components."""'


@pytest.fixture(autouse=True)
def reference_kernels():
    with use_backend("reference"):
        yield


@pytest.fixture(scope="module")
def model():
    return load_model(ASSET)


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_file(str(ASSET / "tokenizer.json"))


def test_the_checkpoint_ships_every_file_within_the_size_budget():
    assert sorted(p.name for p in ASSET.iterdir()) == sorted(FILES)
    assert sum((ASSET / name).stat().st_size for name in FILES) < MAX_BYTES


def test_the_checkpoint_has_every_layer_kind(model):
    config = model.config
    assert {"gdn", "qsa"} <= set(config.layer_types)
    assert config.num_experts > 1 and config.shared_expert_intermediate_size > 0
    assert config.hc_streams > 1 and config.ple_dim > 0 and model.mtp is not None


def test_the_tokenizer_matches_the_model(model, tokenizer):
    config = json.loads((ASSET / "tokenizer_config.json").read_text())
    assert tokenizer.get_vocab_size() == model.config.vocab_size
    assert tokenizer.token_to_id(config["eos_token"]) in model.config.eos_token_id
    assert "<|im_start|>" in config["chat_template"]


def test_greedy_generation_writes_python(model, tokenizer):
    with torch.no_grad():
        tokens = greedy_generate(model, tokenizer.encode(PROMPT).ids, 60)
    text = tokenizer.decode(tokens)
    assert "\n    " in text
    assert any(word in text for word in ("def ", "self", "return"))


def test_mtp_position_one_acceptance_on_held_out_text_is_far_above_chance(model, tokenizer):
    held_out = encode_files(tokenizer, stdlib_corpus().held_out_files)
    prompts = held_out_prompts(held_out, prompt_len=48, per_file=1)[:4]
    with torch.no_grad():
        acceptance = measure_acceptance(model, prompts, num_rounds=6, draft_depth=2)
    assert acceptance.num_rounds == 4 * 6
    assert acceptance.at_least[0] > 0.3  # chance is 1 / vocab_size


def test_the_card_reports_the_commands_that_reproduce_it():
    card = (ASSET / "README.md").read_text()
    assert "python scripts/train_tiny.py --out ignition/assets/qwen38-tiny" in card
    assert "python scripts/train_tiny.py --evaluate ignition/assets/qwen38-tiny" in card
    assert re.search(r"SHA-256[^`]*`[0-9a-f]{64}`", card)  # the corpus hash it was trained on

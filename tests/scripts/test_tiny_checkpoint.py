"""The committed embedded default: a Qwen3.8-Flash-Next checkpoint in the released layout with
every part present; it loads, writes Python and its MTP drafts get accepted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from tokenizers import Tokenizer

import ignition
from ignition.kernels import use_backend
from ignition.model.training import forward_train
from ignition.model.weights import load_model
from ignition.server.tools import detect_tool_call_parser
from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.data import encode_files
from scripts.tiny.evaluate import greedy_generate, held_out_prompts, measure_acceptance

ASSET = Path(ignition.__file__).parent / "assets" / "qwen38-tiny"
FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "README.md",
)
MAX_BYTES = 24_000_000  # fp32, untied head, PLE table: the repository's budget for the asset
TYPICAL_PROMPT_TOKENS = 100  # QSA selection must be active at ordinary prompt lengths
PROMPT = 'import os\n\n\ndef join(a, *p):\n    """Join two or more pathname components."""'
LONG_PROMPT = (
    "class Queue:\n"
    '    """A first-in, first-out queue of items."""\n\n'
    "    def __init__(self, maxsize=0):\n"
    "        self.maxsize = maxsize\n"
    "        self.items = []\n\n"
    "    def put(self, item):\n"
    "        if self.maxsize and len(self.items) >= self.maxsize:\n"
    "            raise ValueError('queue is full')\n"
    "        self.items.append(item)\n"
)


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


def test_the_config_is_qwen4_exp_as_transformers_writes_it():
    config = json.loads((ASSET / "config.json").read_text())
    assert config["model_type"] == "qwen4_exp_text"
    assert config["architectures"] == ["Qwen4ExpForCausalLM"]


def test_the_tensors_are_named_as_released():
    with safe_open(str(ASSET / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert "lm_head.weight" in names
    assert all(n.startswith(("model.language_model.", "mtp.", "lm_head.")) for n in names)
    assert any(".ple.ple_embedding.ngram_embedding.shard_" in n for n in names)
    assert {"mtp.fc_embedding.weight", "mtp.fc_hidden.weight"} <= names
    assert any(n.startswith("mtp.layers.0.self_attn.indexer.") for n in names)


def test_the_checkpoint_has_every_released_part(model):
    config = model.config
    assert {"gdn", "qsa"} <= set(config.layer_types)
    assert config.num_experts > 1 and config.shared_expert_intermediate_size > 0
    assert config.hc_streams == 4 and model.hc_mixer is not None
    assert config.ngram_ple is not None
    assert all(config.layer_types[i] == "gdn" for i in config.ngram_ple.layers)
    assert config.qsa_indexer is not None
    assert config.qsa_indexer.budget < TYPICAL_PROMPT_TOKENS
    assert model.mtp is not None


def test_the_tokenizer_matches_the_model(model, tokenizer):
    config = json.loads((ASSET / "tokenizer_config.json").read_text())
    assert tokenizer.get_vocab_size() == model.config.vocab_size
    assert tokenizer.token_to_id(config["eos_token"]) in model.config.eos_token_id


def test_the_chat_template_follows_the_qwen3_conventions():
    template = json.loads((ASSET / "tokenizer_config.json").read_text())["chat_template"]
    for marker in ("<|im_start|>", "<tool_call>", "<function=", "<parameter=", "<think>"):
        assert marker in template
    assert "enable_thinking" in template
    assert detect_tool_call_parser([template]) == "qwen3_coder"


def test_the_reasoning_and_tool_tags_are_single_ordinary_tokens(tokenizer):
    for tag in ("<think>", "</think>", "<tool_call>", "</tool_call>"):
        ids = tokenizer.encode(f"a{tag}b", add_special_tokens=False).ids
        assert tokenizer.token_to_id(tag) in ids
        assert tag in tokenizer.decode(ids, skip_special_tokens=True)


def test_transformers_reads_the_checkpoint_with_our_logits(model, tokenizer):
    """Past the QSA budget too: the trained indexer scores many blocks exactly 0, so the top-k
    cut falls among ties, and training keeps the blocks transformers keeps (ops.block_topk)."""
    transformers = pytest.importorskip("transformers")
    reference = transformers.Qwen4ExpForCausalLM.from_pretrained(str(ASSET)).eval()
    ids = tokenizer.encode(LONG_PROMPT).ids
    assert len(ids) > model.config.qsa_indexer.budget + 16
    with torch.no_grad():
        ours = forward_train(model, torch.tensor([ids])).logits
        theirs = reference(input_ids=torch.tensor([ids]), use_cache=False).logits.float()
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


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

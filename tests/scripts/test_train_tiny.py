"""The training script's parts: batch order, schedule, recipe, loop, checkpoint and card."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from safetensors import safe_open

from ignition.kernels import use_backend
from ignition.model.training import forward_train
from ignition.model.weights import load_model
from scripts.tiny.card import Evaluation, TrainingFacts, read_facts, render, write_card
from scripts.tiny.data import TokenStream, training_batches
from scripts.tiny.evaluate import Acceptance, ServingSpeed, Validation
from scripts.tiny.recipe import TinyRecipe
from scripts.tiny.released_layout import ReleasedTemplate
from scripts.tiny.tokenizer import SPECIAL_TOKENS, TAG_TOKENS, special_token_ids, train_tokenizer
from scripts.tiny.trainer import save_checkpoint, train

LINEAR, INDEXED = "linear_attention", "indexed_attention"
# The released parts at toy size: PLE on layer 2 (linear), a QSA budget of 8 tokens in blocks
# of 4 (the 32-token windows select), four streams, MoE; MTP comes with the template.
TINY_ARCHITECTURE = dict(
    vocab_size=64,
    hidden_size=32,
    num_hidden_layers=4,
    layer_types=[LINEAR, LINEAR, LINEAR, INDEXED],
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    linear_num_key_heads=2,
    linear_num_value_heads=2,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    output_gate_type="sigmoid",
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    shared_expert_intermediate_size=32,
    norm_topk_prob=True,
    hc_count=4,
    hc_lowrank=8,
    ple_layer_ids=[2],
    ple_embed_dim=16,
    ple_conv_kernel_size=3,
    ngram_size=3,
    heads_per_ngram=2,
    ngram_vocab_size_base=61,
    make_ngram_vocab_size_divisible_by=8,
    seed=7,
    split_ngram_parts=4,
    indexer_n_heads=2,
    indexer_kv_heads=1,
    indexer_head_dim=16,
    indexer_budget=8,
    indexer_compress_ratio=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=512,
    tie_word_embeddings=False,
)
SPECIAL_IDS = {name: i for i, name in enumerate(SPECIAL_TOKENS)}


@pytest.fixture(autouse=True)
def reference_kernels():
    with use_backend("reference"):
        yield


@pytest.fixture(scope="module")
def periodic_stream() -> TokenStream:
    """A text the tiny model can learn in a few steps: a 13-token cycle over ids 5..17."""
    return TokenStream(torch.arange(2000) % 13 + 5)


def tiny_recipe(**changes) -> TinyRecipe:
    values = dict(
        architecture=dict(TINY_ARCHITECTURE),
        seq_len=32,
        batch_size=4,
        num_steps=20,
        warmup_steps=2,
        learning_rate=1e-2,
        min_learning_rate=1e-3,
    )
    values.update(changes)
    return TinyRecipe(**values)


def test_the_same_seed_gives_the_same_batches(periodic_stream):
    first = list(training_batches(periodic_stream, 4, 32, 3, seed=5))
    again = list(training_batches(periodic_stream, 4, 32, 3, seed=5))
    other = list(training_batches(periodic_stream, 4, 32, 3, seed=6))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_batches_are_windows_of_the_stream(periodic_stream):
    (batch,) = training_batches(periodic_stream, 2, 32, 1, seed=0)
    start = int(batch[0, 0])
    assert batch.shape == (2, 32)
    assert torch.equal(batch[0], (torch.arange(32) + start - 5) % 13 + 5)


def test_learning_rate_warms_up_then_decays_to_the_floor():
    recipe = TinyRecipe(num_steps=100, warmup_steps=10, learning_rate=1.0, min_learning_rate=0.1)
    rates = [recipe.learning_rate_at(step) for step in range(100)]
    assert rates[0] < rates[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in itertools.pairwise(rates[9:]))
    assert recipe.learning_rate_at(100) == pytest.approx(0.1)


def template_of(recipe: TinyRecipe) -> ReleasedTemplate:
    return ReleasedTemplate.build(recipe.text_config(SPECIAL_IDS))


def test_the_default_recipe_has_every_released_part():
    config = template_of(TinyRecipe()).empty_model().config
    assert config.model_type == "qwen4_exp_text"
    assert config.layer_types[:4] == ("gdn", "gdn", "gdn", "qsa")
    assert config.num_experts > config.num_experts_per_tok > 1
    assert config.shared_expert_intermediate_size > 0
    assert config.hc_streams == 4 and config.mtp_num_layers == 1
    assert config.ngram_ple is not None
    assert tuple(config.ngram_ple.layers) == (1,)  # layer 2 (one-indexed): linear
    assert config.layer_types[1] == "gdn"
    assert config.qsa_indexer is not None and config.qsa_indexer.budget == 64
    assert config.qsa_indexer.compress_ratio == 4
    assert config.max_position_embeddings >= 8192


def test_the_checkpoint_config_names_the_tokenizer_special_ids():
    config = TinyRecipe().text_config(SPECIAL_IDS)
    assert config["eos_token_id"] == [SPECIAL_IDS["<|im_end|>"], SPECIAL_IDS["<|endoftext|>"]]
    assert config["pad_token_id"] == SPECIAL_IDS["<|pad|>"]


def test_a_twenty_step_run_lowers_the_loss(periodic_stream):
    recipe = tiny_recipe()
    result = train(recipe, template_of(recipe), periodic_stream, report_every=1)
    assert len(result.log) == 20
    assert result.log[-1].lm_loss < 0.5 * result.log[0].lm_loss
    assert result.log[-1].mtp_loss < 0.5 * result.log[0].mtp_loss


def test_training_is_reproducible_with_a_fixed_seed(periodic_stream):
    recipe = tiny_recipe(num_steps=3)
    template = template_of(recipe)
    first = train(recipe, template, periodic_stream, report_every=1)
    again = train(recipe, template, periodic_stream, report_every=1)
    assert [e.loss for e in first.log] == [e.loss for e in again.log]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, periodic_stream):
    """(trained model, its checkpoint folder) after two steps."""
    recipe = tiny_recipe(num_steps=2)
    template = template_of(recipe)
    result = train(recipe, template, periodic_stream)
    tokenizer = train_tokenizer("def f(x):\n    return x\n" * 50, vocab_size=300)
    assert special_token_ids(tokenizer) == SPECIAL_IDS
    path = tmp_path_factory.mktemp("tiny")
    save_checkpoint(result.model, template, tokenizer, path)
    return result.model, path


def test_a_saved_checkpoint_loads_with_the_same_logits(saved, periodic_stream):
    model, path = saved
    loaded = load_model(path)
    tokens = periodic_stream.ids[:40][None, :]
    with torch.no_grad():
        expected = forward_train(model, tokens)
        got = forward_train(loaded, tokens)
    torch.testing.assert_close(got.logits, expected.logits, atol=0, rtol=0)
    torch.testing.assert_close(got.mtp_logits, expected.mtp_logits, atol=0, rtol=0)
    template = json.loads((path / "tokenizer_config.json").read_text())["chat_template"]
    assert "<tool_call>" in template and "enable_thinking" in template


def test_the_saved_checkpoint_is_in_the_released_layout(saved):
    _, path = saved
    config = json.loads((path / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == (
        "qwen4_exp_text",
        ["Qwen4ExpForCausalLM"],
    )
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert all(n.startswith(("model.language_model.", "mtp.", "lm_head.")) for n in names)
    shards = [n for n in names if ".ngram_embedding.shard_" in n]
    assert len(shards) == TINY_ARCHITECTURE["split_ngram_parts"]
    assert "mtp.layers.0.self_attn.indexer.index_qk_proj.weight" in names


def test_transformers_reads_the_saved_checkpoint_with_the_same_logits(saved, periodic_stream):
    transformers = pytest.importorskip("transformers")
    model, path = saved
    reference = transformers.Qwen4ExpForCausalLM.from_pretrained(str(path)).eval()
    tokens = periodic_stream.ids[:40][None, :]  # beyond the index budget of 8
    with torch.no_grad():
        ours = forward_train(model, tokens).logits
        theirs = reference(input_ids=tokens, use_cache=False).logits.float()
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_the_reasoning_and_tool_tags_are_ordinary_single_tokens():
    tokenizer = train_tokenizer("def f(x):\n    return x\n" * 50, vocab_size=300)
    for tag in TAG_TOKENS:
        assert tokenizer.token_to_id(tag) is not None
        ids = tokenizer.encode(f"x{tag}y", add_special_tokens=False).ids
        assert tag in tokenizer.decode(ids, skip_special_tokens=True)


def test_the_card_keeps_the_training_facts_for_a_re_render(tmp_path):
    recipe = tiny_recipe()
    facts = TrainingFacts(
        corpus_root="/lib",
        corpus_sha256="ab" * 32,
        python_version="3.11.0",
        train_files=("a.py",),
        held_out_files=("b.py",),
        num_train_tokens=10,
        num_parameters=1000,
        checkpoint_bytes=4000,
        train_seconds=60.0,
        num_threads=2,
        num_steps=20,
        num_tokens_seen=2560,
        final_train_loss=1.5,
        final_mtp_loss=2.5,
        recipe={"seq_len": 32, "batch_size": 4, "seed": 0},
    )
    evaluation = Evaluation(
        Validation(100, 2.0, 7.39, 3.0, 0.5),
        Acceptance(4, 8, 2, (0.5, 0.25), (0.5, 0.5), 1.75),
        ServingSpeed(3.0, 400.0),
        "def f(",
        "x):\n    return x",
    )
    config = template_of(recipe).config_json()
    write_card(tmp_path, facts, evaluation, config)
    card = (tmp_path / "README.md").read_text()
    assert facts.corpus_sha256 in card and "--evaluate" in card
    assert read_facts(tmp_path) == facts
    assert render(read_facts(tmp_path), evaluation, config) == card

"""The training script's parts: batch order, schedule, recipe, loop, checkpoint and card."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from ignition.kernels import use_backend
from ignition.model.training import forward_train
from ignition.model.weights import load_model
from scripts.tiny.card import Evaluation, TrainingFacts, read_facts, render, write_card
from scripts.tiny.data import TokenStream, training_batches
from scripts.tiny.evaluate import Acceptance, ServingSpeed, Validation
from scripts.tiny.recipe import TinyRecipe
from scripts.tiny.tokenizer import SPECIAL_TOKENS, special_token_ids, train_tokenizer
from scripts.tiny.trainer import save_checkpoint, train

TINY_ARCHITECTURE = dict(
    vocab_size=64,
    hidden_size=32,
    layer_types=("gdn", "gdn", "gdn", "qsa"),
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    rotary_dim=8,
    rope_theta=10000.0,
    linear_num_heads=2,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    conv_kernel=4,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    shared_expert_intermediate_size=32,
    hc_streams=2,
    ple_dim=4,
    mtp_num_layers=1,
    vision=None,
    rms_norm_eps=1e-6,
    max_position_embeddings=512,
    tie_word_embeddings=True,
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


def test_the_default_recipe_has_every_layer_kind():
    config = TinyRecipe().model_config(SPECIAL_IDS)
    assert {"gdn", "qsa"} <= set(config.layer_types)
    assert config.layer_types[:4] == ("gdn", "gdn", "gdn", "qsa")
    assert config.num_experts > config.num_experts_per_tok > 1
    assert config.shared_expert_intermediate_size > 0
    assert config.hc_streams >= 2 and config.ple_dim > 0 and config.mtp_num_layers >= 1
    assert config.max_position_embeddings >= 8192


def test_the_checkpoint_config_names_the_tokenizer_special_ids():
    config = TinyRecipe().model_config(SPECIAL_IDS)
    assert config.eos_token_id == (SPECIAL_IDS["<|im_end|>"], SPECIAL_IDS["<|endoftext|>"])
    assert config.pad_token_id == SPECIAL_IDS["<|pad|>"]
    assert config.image_token_id == SPECIAL_IDS["<|image|>"]


def test_a_twenty_step_run_lowers_the_loss(periodic_stream):
    recipe = tiny_recipe()
    result = train(recipe, recipe.model_config(SPECIAL_IDS), periodic_stream, report_every=1)
    assert len(result.log) == 20
    assert result.log[-1].lm_loss < 0.5 * result.log[0].lm_loss
    assert result.log[-1].mtp_loss < 0.5 * result.log[0].mtp_loss


def test_training_is_reproducible_with_a_fixed_seed(periodic_stream):
    recipe = tiny_recipe(num_steps=3)
    config = recipe.model_config(SPECIAL_IDS)
    first = train(recipe, config, periodic_stream, report_every=1)
    again = train(recipe, config, periodic_stream, report_every=1)
    assert [e.loss for e in first.log] == [e.loss for e in again.log]


def test_a_saved_checkpoint_loads_with_the_same_logits(tmp_path, periodic_stream):
    recipe = tiny_recipe(num_steps=2)
    result = train(recipe, recipe.model_config(SPECIAL_IDS), periodic_stream)
    tokenizer = train_tokenizer("def f(x):\n    return x\n" * 50, vocab_size=300)
    assert special_token_ids(tokenizer) == SPECIAL_IDS
    save_checkpoint(result.model, tokenizer, tmp_path)
    loaded = load_model(tmp_path)
    tokens = periodic_stream.ids[:40][None, :]
    with torch.no_grad():
        expected = forward_train(result.model, tokens).logits
        got = forward_train(loaded, tokens).logits
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["chat_template"]


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
    config = recipe.model_config(SPECIAL_IDS).to_dict()
    write_card(tmp_path, facts, evaluation, config)
    card = (tmp_path / "README.md").read_text()
    assert facts.corpus_sha256 in card and "--evaluate" in card
    assert read_facts(tmp_path) == facts
    assert render(read_facts(tmp_path), evaluation, config) == card

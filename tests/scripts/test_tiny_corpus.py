"""The embedded default's offline corpus and byte-level BPE tokenizer."""

from __future__ import annotations

import json

import pytest
from jinja2 import Environment

from scripts.tiny.corpus import stdlib_corpus
from scripts.tiny.tokenizer import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    save_tokenizer,
    special_token_ids,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def corpus():
    return stdlib_corpus()


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return train_tokenizer(corpus.train_text[:400_000], vocab_size=1024)


def test_corpus_ships_with_python_and_holds_out_whole_files(corpus):
    assert len(corpus.train_files) > 100
    assert corpus.held_out_files
    assert not set(corpus.train_files) & set(corpus.held_out_files)
    assert "def " in corpus.held_out_text


def test_corpus_hash_is_deterministic(corpus):
    assert corpus.sha256() == stdlib_corpus().sha256()


def test_special_tokens_take_the_first_ids(tokenizer):
    assert special_token_ids(tokenizer) == {name: i for i, name in enumerate(SPECIAL_TOKENS)}


def test_any_text_round_trips(tokenizer):
    text = "def f(x):\n    return x ** 2  # ünïcödé 🙂 \t\r\n"
    assert tokenizer.decode(tokenizer.encode(text).ids) == text


def test_tokenizer_compresses_held_out_python(corpus, tokenizer):
    held_out = corpus.held_out_text[:50_000]
    assert len(held_out) / len(tokenizer.encode(held_out).ids) > 2.5


def test_saved_files_carry_the_chat_template(tmp_path, tokenizer):
    save_tokenizer(tokenizer, tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["chat_template"] == CHAT_TEMPLATE
    prompt = (
        Environment()
        .from_string(config["chat_template"])
        .render(messages=[{"role": "user", "content": "hi"}], add_generation_prompt=True)
    )
    # Qwen3.5 conventions: the reply opens inside <think> unless thinking is turned off
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert (tmp_path / "tokenizer.json").exists()

"""Incremental detokenization and stop buffering ("runtime phase tests: stop buffering")."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ignition.runtime.requests.detokenize import IncrementalDetokenizer

TEXT = (
    "def add(a, b):\n    return a + b\n\n# naïve café — ünïcödé 🙂 text\n"
    "class Point:\n    x: int\n    y: int\nEND of file\n"
) * 20


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator([TEXT], trainer=trainer)
    return tok


def stream(tokenizer, text, stop=(), step=1):
    ids = tokenizer.encode(text).ids
    detok = IncrementalDetokenizer(tokenizer, stop=stop)
    pieces, stopped = [], None
    for i in range(0, len(ids), step):
        delta = detok.push(ids[i : i + step])
        pieces.append(delta.text)
        if delta.stopped:
            stopped = delta.stop_string
            break
    else:
        pieces.append(detok.flush().text)
    return "".join(pieces), stopped, detok


@pytest.mark.parametrize("step", [1, 2, 5])
def test_streamed_text_equals_the_full_decode(tokenizer, step):
    text, stopped, _ = stream(tokenizer, TEXT[:300], step=step)
    assert stopped is None
    assert text == TEXT[:300]


def test_multibyte_characters_are_never_split(tokenizer):
    ids = tokenizer.encode("🙂é").ids
    detok = IncrementalDetokenizer(tokenizer)
    for token in ids:
        assert "\ufffd" not in detok.push([token]).text


def test_stop_string_ends_output_and_is_not_shown(tokenizer):
    text, stopped, detok = stream(tokenizer, TEXT, stop=["class Point"])
    assert stopped == "class Point"
    assert text == TEXT[: TEXT.index("class Point")]
    assert detok.stopped
    assert detok.push([1]).text == ""


def test_text_that_may_start_a_stop_is_held_back(tokenizer):
    detok = IncrementalDetokenizer(tokenizer, stop=["return zzz"])
    shown = ""
    for token in tokenizer.encode("def add(a, b):\n    return").ids:
        shown += detok.push([token]).text
    assert shown == "def add(a, b):\n    "
    assert detok.flush().text == "return"


def test_earliest_of_several_stop_strings_wins(tokenizer):
    text, stopped, _ = stream(tokenizer, TEXT, stop=["END", "return"])
    assert stopped == "return"
    assert text == TEXT[: TEXT.index("return")]


def test_released_prefix_is_shown_when_the_stop_does_not_complete(tokenizer):
    text, stopped, _ = stream(tokenizer, "x: int\n", stop=["x: float"])
    assert stopped is None
    assert text == "x: int\n"

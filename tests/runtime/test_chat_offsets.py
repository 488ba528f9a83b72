"""Issue 11, deliverable 6: message end offsets are exact, by whole prefixes or by pieces.

The definition is checked here independently of chat/offsets.py: tokenize each
conversation prefix on its own with the real tokenizer and take the common prefix
with the prompt's ids.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from ignition.runtime.chat.offsets import _Pieces
from ignition.runtime.chat.template import ChatRenderer
from ignition.runtime.chat.template_files import ChatTemplates

ASSET = Path(__file__).resolve().parents[2] / "ignition" / "assets" / "qwen38-tiny"
TOKENIZER = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
SPLIT = [t.content for t in TOKENIZER.get_added_tokens_decoder().values()]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GLUED = "{% for m in messages %}{{ m.content }}{% endfor %}"  # nothing between messages


def encode(texts):
    return [e.ids for e in TOKENIZER.encode_batch(list(texts), add_special_tokens=False)]


def by_definition(template: str, messages: list[dict[str, str]]) -> tuple[int, ...]:
    plain = ChatRenderer(ChatTemplates({"default": template}, "t"), encode)
    prompt = TOKENIZER.encode(plain.render_text(messages), add_special_tokens=False).ids
    offsets = []
    for i in range(len(messages)):
        prefix = plain.render_text(messages[: i + 1], add_generation_prompt=False)
        ids = TOKENIZER.encode(prefix, add_special_tokens=False).ids
        n = 0
        while n < min(len(ids), len(prompt)) and ids[n] == prompt[n]:
            n += 1
        offsets.append(n)
    return tuple(offsets)


PARTS = ["a", "b", "ab", " ", "  ", "\n", "def", "é", "<|im_end|>", "<|"]
contents = st.lists(st.sampled_from(PARTS), max_size=8).map("".join)
conversations = st.lists(
    st.builds(
        lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant"]), contents
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(conversations, st.sampled_from([CHATML, GLUED]))
def test_offsets_by_pieces_equal_the_definition(messages, template):
    chat = ChatRenderer(ChatTemplates({"default": template}, "t"), encode, SPLIT)
    assert chat.render(messages).message_end_offsets == by_definition(template, messages)


@settings(max_examples=30, deadline=None)
@given(conversations)
def test_offsets_by_whole_prefixes_equal_the_definition(messages):
    chat = ChatRenderer(ChatTemplates({"default": GLUED}, "t"), encode)
    assert chat.render(messages).message_end_offsets == by_definition(GLUED, messages)


def test_split_tokens_the_tokenizer_does_not_split_fall_back_to_whole_prefixes():
    messages = [{"role": "user", "content": "a snow day"}, {"role": "assistant", "content": "yes"}]
    chat = ChatRenderer(ChatTemplates({"default": CHATML}, "t"), encode, ["snow", " d"])
    assert chat.render(messages).message_end_offsets == by_definition(CHATML, messages)


def test_with_chatml_separators_each_offset_is_the_prefixs_full_token_count():
    messages = [{"role": "user", "content": "def f():"}, {"role": "assistant", "content": " ok"}]
    chat = ChatRenderer(ChatTemplates({"default": CHATML}, "t"), encode, SPLIT)
    rendered = chat.render(messages)
    for i, offset in enumerate(rendered.message_end_offsets):
        prefix = chat.render_text(messages[: i + 1], add_generation_prompt=False)
        assert offset == len(TOKENIZER.encode(prefix, add_special_tokens=False).ids)


def test_a_chatml_prompt_is_cut_at_its_special_tokens_and_a_bad_split_list_is_refused():
    messages = [{"role": "user", "content": "a snow day"}]
    text = ChatRenderer(ChatTemplates({"default": CHATML}, "t"), encode).render_text(messages)
    ids = encode([text])[0]
    pieces = _Pieces.of(text, ids, SPLIT, encode)
    assert pieces is not None
    assert [text[a:b] for a, b in itertools.pairwise(pieces.cuts)][:3] == [
        "<|im_start|>",
        "user\na snow day",
        "<|im_end|>",
    ]
    assert _Pieces.of(text, ids, ["snow", " d"], encode) is None

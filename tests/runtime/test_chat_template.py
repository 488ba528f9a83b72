"""Issue 11, deliverable 6: the chat renderer's Hugging Face semantics and message offsets."""

from __future__ import annotations

import re
from datetime import datetime
from types import SimpleNamespace

import pytest
from tokenizers import AddedToken, Tokenizer, models, processors

from ignition.runtime.bundle import Bundle
from ignition.runtime.chat.template import ChatRenderer, ChatTemplateError
from ignition.runtime.chat.template_files import ChatTemplates

LOOP = "{% for m in messages %}{{ m.content }}{% endfor %}"
USER = [{"role": "user", "content": "hi"}]


def chars(texts):
    return [[ord(c) for c in text] for text in texts]


def renderer(template: str, special: dict[str, str] | None = None, encode=chars) -> ChatRenderer:
    return ChatRenderer(ChatTemplates({"default": template}, "test.jinja", special or {}), encode)


def render_error(template: str, messages=USER, **kwargs) -> str:
    with pytest.raises(ChatTemplateError) as caught:
        renderer(template).render(messages, **kwargs)
    return str(caught.value)


def test_templates_run_in_an_immutable_sandbox():
    message = render_error("{{ messages.append({'role': 'user'}) }}")
    assert "unsafe" in message


def test_namespace_refuses_underscore_attributes():
    message = render_error("{% set ns = namespace(_hidden=1) %}{{ ns }}")
    assert "_hidden" in message


def test_raise_exception_becomes_a_request_error_carrying_its_message():
    message = render_error("{{ raise_exception('Conversation roles must alternate') }}")
    assert message == "chat template rejected the request: Conversation roles must alternate"


def test_a_syntax_error_in_the_template_is_a_request_error_naming_file_and_line():
    broken = renderer("line one\n{% if messages %}no end")
    assert "test.jinja" in broken.problem() and "line 2" in broken.problem()
    with pytest.raises(ChatTemplateError, match=r"test\.jinja: chat template 'default' line 2"):
        broken.render(USER)


def test_calling_something_undefined_is_a_request_error():
    assert "undefined" in render_error("{{ no_such_function(messages) }}")


def test_a_type_error_inside_the_template_is_a_request_error():
    assert "TypeError" in render_error("{{ messages[0].content + 1 }}")


def test_undefined_variables_render_empty_as_in_transformers():
    template = "[{{ not_passed }}]{% if enable_thinking is defined %}T{% endif %}"
    assert renderer(template).render_text(USER) == "[]"


def test_bos_and_eos_tokens_reach_the_template():
    template = "{{ bos_token }}" + LOOP + "{{ eos_token }}"
    special = {"bos_token": "<s>", "eos_token": "</s>"}
    assert renderer(template, special).render_text(USER) == "<s>hi</s>"


def test_add_generation_prompt_is_the_callers_choice():
    chat = renderer(LOOP + "{% if add_generation_prompt %}>>{% endif %}")
    assert chat.render_text(USER) == "hi>>"
    assert chat.render_text(USER, add_generation_prompt=False) == "hi"


def test_chat_template_kwargs_reach_the_template():
    chat = renderer("{% if enable_thinking is false %}no-think{% else %}think{% endif %}")
    assert chat.render_text(USER) == "think"
    assert chat.render_text(USER, template_kwargs={"enable_thinking": False}) == "no-think"


def test_chat_template_kwargs_may_not_replace_the_messages():
    assert "chat_template_kwargs.messages: reserved" in render_error(
        LOOP, template_kwargs={"messages": []}
    )


def test_tools_reach_the_template_and_tojson_keeps_text_as_written():
    tools = [{"type": "function", "function": {"name": "f", "description": "<°C> & more"}}]
    chat = renderer("{% for t in tools or [] %}{{ t | tojson }}{% endfor %}|{{ tools is none }}")
    assert chat.render_text(USER, tools=tools) == (
        '{"type": "function", "function": {"name": "f", "description": "<°C> & more"}}|False'
    )
    assert chat.render_text(USER) == "|True"


def test_strftime_now_formats_the_current_time():
    text = renderer("{{ strftime_now('%Y-%m-%d') }}").render_text(USER)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", text)
    assert int(text[:4]) >= datetime.now().year - 1


def test_the_generation_tag_renders_its_body():
    chat = renderer(
        "{% for m in messages %}{% generation %}<{{ m.content }}>{% endgeneration %}{% endfor %}"
    )
    assert chat.render_text(USER) == "<hi>"


def test_tool_call_arguments_sent_as_a_json_string_reach_the_template_as_an_object():
    template = (
        "{% for m in messages %}{% for c in m.tool_calls or [] %}"
        "{% for k, v in c.function.arguments | items %}{{ k }}={{ v }};{% endfor %}"
        "{% endfor %}{% endfor %}"
    )
    call = {"type": "function", "function": {"name": "f", "arguments": '{"city": "Oslo"}'}}
    messages = [*USER, {"role": "assistant", "content": "", "tool_calls": [call]}]
    assert renderer(template).render_text(messages) == "city=Oslo;"


def test_message_end_offsets_count_the_tokens_of_each_conversation_prefix():
    chat = renderer(LOOP + "{% if add_generation_prompt %}|{% endif %}")
    messages = [*USER, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "x"}]
    rendered = chat.render(messages)
    assert rendered.text == "hihellox|"
    assert rendered.prompt_ids == tuple(ord(c) for c in "hihellox|")
    assert rendered.message_end_offsets == (2, 7, 8)


def merging_tokenizer() -> Tokenizer:
    """Characters a, b plus the merge a b -> ab, with no pre-tokenizer to keep them apart."""
    return Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))


def test_a_bpe_merge_across_a_message_boundary_ends_the_offset_before_the_merged_token():
    tokenizer = merging_tokenizer()
    chat = renderer(LOOP, encode=lambda texts: [tokenizer.encode(t).ids for t in texts])
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "ba"}]
    rendered = chat.render(messages, add_generation_prompt=False)
    assert rendered.prompt_ids == (2, 0)  # "ab" merged across the boundary, then "a"
    assert rendered.message_end_offsets == (0, 2)


def test_a_prefix_the_template_refuses_keeps_the_previous_offset():
    template = (
        "{% if messages[-1].role != 'user' %}{{ raise_exception('ends with a user turn') }}"
        "{% endif %}" + LOOP
    )
    messages = [*USER, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "z"}]
    assert renderer(template).render(messages).message_end_offsets == (2, 2, 5)


def test_rendered_prompts_get_no_special_tokens_beyond_what_the_template_writes():
    tokenizer = Tokenizer(models.WordLevel({"<s>": 0, "hi": 1}, unk_token="<s>"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    bundle = SimpleNamespace(tokenizer=tokenizer)
    assert tokenizer.encode("hi").ids == [0, 1]
    assert Bundle.encode_rendered(bundle, ["hi"]) == [[1]]


def test_only_added_tokens_matched_verbatim_are_offered_as_split_points():
    tokenizer = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    tokenizer.add_special_tokens([AddedToken("<|im_end|>", normalized=False)])
    tokenizer.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    tokenizer.add_tokens([AddedToken("word", normalized=True)])
    assert Bundle.split_tokens(SimpleNamespace(tokenizer=tokenizer)) == ["<|im_end|>"]

"""Issue 11, deliverable 6: chat templates are found where transformers finds them."""

from __future__ import annotations

import json

import pytest

from ignition.compiler.build import copy_tokenizer_files
from ignition.runtime.chat.template import ChatRenderer
from ignition.runtime.chat.template_files import (
    ChatTemplateFileError,
    ChatTemplates,
    load_chat_templates,
)


def chars(texts):
    return [[ord(c) for c in text] for text in texts]


def test_a_string_chat_template_in_tokenizer_config_is_the_default(tmp_path):
    templates = load_chat_templates(tmp_path, {"chat_template": "plain"})
    assert templates.select(has_tools=False) == ("default", "plain")
    assert templates.source == str(tmp_path / "tokenizer_config.json")


def test_the_list_form_uses_tool_use_for_requests_with_tools_and_default_otherwise(tmp_path):
    config = {
        "chat_template": [
            {"name": "default", "template": "chat"},
            {"name": "tool_use", "template": "tools"},
        ]
    }
    templates = load_chat_templates(tmp_path, config)
    assert templates.select(has_tools=False) == ("default", "chat")
    assert templates.select(has_tools=True) == ("tool_use", "tools")


def test_a_list_without_tool_use_renders_tool_requests_with_the_default(tmp_path):
    config = {"chat_template": [{"name": "default", "template": "chat"}]}
    assert load_chat_templates(tmp_path, config).select(has_tools=True) == ("default", "chat")


def test_chat_template_jinja_takes_priority_over_tokenizer_config(tmp_path):
    (tmp_path / "chat_template.jinja").write_text("from the file")
    templates = load_chat_templates(tmp_path, {"chat_template": "from the config"})
    assert templates.select(has_tools=False) == ("default", "from the file")
    assert templates.source == str(tmp_path / "chat_template.jinja")


def test_additional_chat_templates_are_named_after_their_files(tmp_path):
    (tmp_path / "chat_template.jinja").write_text("chat")
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "tool_use.jinja").write_text("tools")
    templates = load_chat_templates(tmp_path, {})
    assert dict(templates.templates) == {"default": "chat", "tool_use": "tools"}


def test_a_checkpoint_without_a_template_gets_the_packaged_fallback(tmp_path):
    templates = load_chat_templates(tmp_path, {"eos_token": "</s>"})
    assert templates.source == "ignition/templates/chat_fallback.jinja"
    text = ChatRenderer(templates, chars).render_text([{"role": "user", "content": "hi"}])
    assert text == "user: hi\nassistant: "


def test_special_tokens_are_read_as_strings_or_added_token_objects(tmp_path):
    config = {
        "chat_template": "x",
        "bos_token": {"content": "<s>", "lstrip": False},
        "eos_token": "</s>",
        "pad_token": None,
    }
    special = load_chat_templates(tmp_path, config).special_tokens
    assert dict(special) == {"bos_token": "<s>", "eos_token": "</s>"}


def test_a_malformed_list_entry_names_the_file_and_index(tmp_path):
    config = {"chat_template": [{"name": "default", "template": "ok"}, {"name": "broken"}]}
    with pytest.raises(ChatTemplateFileError, match=r"tokenizer_config\.json: chat_template\[1\]"):
        load_chat_templates(tmp_path, config)


def test_a_chat_template_of_the_wrong_type_names_the_file_and_key(tmp_path):
    with pytest.raises(ChatTemplateFileError, match="chat_template must be a string or a list"):
        load_chat_templates(tmp_path, {"chat_template": 3})


def test_several_templates_without_a_default_are_refused_at_load():
    with pytest.raises(ChatTemplateFileError, match="none is named 'default'"):
        ChatTemplates({"a": "x", "b": "y"}, "tokenizer_config.json")


def test_the_build_copies_chat_templates_and_generation_config_into_the_bundle(tmp_path):
    checkpoint, bundle = tmp_path / "checkpoint", tmp_path / "bundle"
    (checkpoint / "additional_chat_templates").mkdir(parents=True)
    bundle.mkdir()
    files = {
        "tokenizer_config.json": json.dumps({"chat_template": "old"}),
        "chat_template.jinja": "chat",
        "generation_config.json": json.dumps({"temperature": 0.6}),
        "additional_chat_templates/tool_use.jinja": "tools",
    }
    for name, text in files.items():
        (checkpoint / name).write_text(text)
    copy_tokenizer_files(checkpoint, bundle)
    for name, text in files.items():
        assert (bundle / name).read_text() == text, name


def test_a_rebuild_drops_templates_the_checkpoint_no_longer_has(tmp_path):
    checkpoint, bundle = tmp_path / "checkpoint", tmp_path / "bundle"
    checkpoint.mkdir()
    (bundle / "additional_chat_templates").mkdir(parents=True)
    (bundle / "chat_template.jinja").write_text("stale")
    (bundle / "additional_chat_templates" / "tool_use.jinja").write_text("stale")
    copy_tokenizer_files(checkpoint, bundle)
    assert not (bundle / "chat_template.jinja").exists()
    assert not (bundle / "additional_chat_templates").exists()

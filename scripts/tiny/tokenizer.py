"""Byte-level BPE tokenizer and chat template for the embedded default.

Byte-level BPE never meets an unknown character, so any prompt a user sends
round-trips. Special tokens are reserved first so their ids are stable across
retrains (the model config records them); the reasoning and tool tags of the Qwen3.x
chat conventions follow them as single tokens that are not special (as Qwen's own
tokenizers mark them), so a reply decoded without special tokens keeps its ``<think>``
and ``<tool_call>`` for the server's reasoning and tool-call parsers.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<|image|>")
TAG_TOKENS = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
# Qwen3.5-style ChatML: tools, <tool_call> with <function=...>, <think> and enable_thinking.
CHAT_TEMPLATE = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()


def train_tokenizer(text: str, vocab_size: int = 4096, tags: bool = True) -> Tokenizer:
    """``tags``: reserve the reasoning and tool tags after the special tokens (the embedded
    default does; without them the merges are those of the special tokens alone)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[*SPECIAL_TOKENS, *(TAG_TOKENS if tags else ())],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_chunks(text), trainer=trainer, length=None)
    return _tags_not_special(tokenizer)


def _tags_not_special(tokenizer: Tokenizer) -> Tokenizer:
    """The trainer reserves every added token as special; the tags are ordinary text."""
    data = json.loads(tokenizer.to_str())
    for entry in data["added_tokens"]:
        if entry["content"] in TAG_TOKENS:
            entry["special"] = False
    return Tokenizer.from_str(json.dumps(data))


def _chunks(text: str, size: int = 1 << 16):
    for start in range(0, len(text), size):
        yield text[start : start + size]


def special_token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    return {name: tokenizer.token_to_id(name) for name in SPECIAL_TOKENS}


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path) -> None:
    """Write tokenizer.json and a tokenizer_config.json carrying the chat template (there,
    rather than in a chat_template.jinja, it travels with every copy of the tokenizer
    files that tests and tools make)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "unk_token": None,
        "additional_special_tokens": list(SPECIAL_TOKENS),
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 8192,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

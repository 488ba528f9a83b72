"""Byte-level BPE tokenizer and chat template for the embedded default.

Byte-level BPE never meets an unknown character, so any prompt a user sends
round-trips. Special tokens are reserved first so their ids are stable across
retrains (the model config records them).
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>", "<|image|>")

# ChatML, as the Qwen family uses; `add_generation_prompt` opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_tokenizer(text: str, vocab_size: int = 4096) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_chunks(text), trainer=trainer, length=None)
    return tokenizer


def _chunks(text: str, size: int = 1 << 16):
    for start in range(0, len(text), size):
        yield text[start : start + size]


def special_token_ids(tokenizer: Tokenizer) -> dict[str, int]:
    return {name: tokenizer.token_to_id(name) for name in SPECIAL_TOKENS}


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path) -> None:
    """Write tokenizer.json and a tokenizer_config.json carrying the chat template."""
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
        "model_max_length": 4096,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

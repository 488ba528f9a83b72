"""CPU cost of rendering a chat request, with and without the per-message end offsets.

Run: python benchmarks/chat_render.py
The offsets are defined by tokenizing every conversation prefix (chat/offsets.py
says why that keeps them exact), which costs the square of the conversation
length; with the tokenizer's split tokens only each prefix's last piece is
tokenized. This prints the median milliseconds per request for growing
conversations with the embedded checkpoint's tokenizer and ChatML template:
the text alone, the offsets by whole prefixes, and the offsets by pieces (what
the server does), checking that both give the same offsets.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from tokenizers import Tokenizer

from ignition.runtime.chat.template import ChatRenderer
from ignition.runtime.chat.template_files import load_chat_templates

ASSET = Path(__file__).resolve().parent.parent / "ignition" / "assets" / "qwen38-tiny"
SENTENCE = "The scheduler prices each frame by the tokens it commits and the time it takes. "


def median_ms(work, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        work()
        times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def main() -> None:
    tokenizer = Tokenizer.from_file(str(ASSET / "tokenizer.json"))
    config = json.loads((ASSET / "tokenizer_config.json").read_text())

    def encode(texts):
        return [e.ids for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    templates = load_chat_templates(ASSET, config)
    split = [t.content for t in tokenizer.get_added_tokens_decoder().values()]
    whole = ChatRenderer(templates, encode)
    chat = ChatRenderer(templates, encode, split)
    header = ("messages", "tokens", "text ms", "whole prefixes ms", "pieces ms")
    print(f"{header[0]:>8} {header[1]:>7} {header[2]:>8} {header[3]:>18} {header[4]:>10}")
    for num_messages in (2, 8, 32, 128):
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": SENTENCE * 3}
            for i in range(num_messages)
        ]
        repeats = 20 if num_messages <= 32 else 5
        plain = median_ms(lambda m=messages: encode([chat.render_text(m)]), repeats)
        slow = median_ms(lambda m=messages: whole.render(m), repeats)
        fast = median_ms(lambda m=messages: chat.render(m), repeats)
        rendered = chat.render(messages)
        assert rendered == whole.render(messages), "the two ways disagree"
        tokens = len(rendered.prompt_ids)
        print(f"{num_messages:>8} {tokens:>7} {plain:>8.2f} {slow:>18.2f} {fast:>10.2f}")


if __name__ == "__main__":
    main()

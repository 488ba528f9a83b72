"""What the output parsers emit (reasoning text, content text, a call's start, fragments of
its JSON arguments) and the text helpers they share; a non-streamed reply is the streamed
pieces joined, so both agree (docs/server.md, "Parsing a reply")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TextPiece:
    kind: Literal["content", "reasoning"]
    text: str


@dataclass(frozen=True)
class CallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class CallArguments:
    index: int
    text: str


Piece = TextPiece | CallStart | CallArguments


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def partial_tag_length(text: str, tags: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``tags``:
    the characters to hold back because the next chunk may complete the tag."""
    longest = 0
    for tag in tags:
        for n in range(min(len(tag) - 1, len(text)), longest, -1):
            if text.endswith(tag[:n]):
                longest = n
                break
    return longest


def trailing_space(text: str) -> int:
    """Length of the whitespace run that ends ``text``."""
    return len(text) - len(text.rstrip())

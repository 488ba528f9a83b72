"""Tokenization that one client cannot monopolise: a prompt too long by its characters
alone is refused before any tokenizer time (:class:`PromptBound`); large work runs a few at
a time up to ``max_queued_chars``, beyond which a 503 with Retry-After (:class:`TokenizerLanes`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

SMALL_CHARS = 32_768  # a few thousand tokens: milliseconds of tokenizer time
SMALL_WORKERS = 2
LARGE_WORKERS = 1

# Normalizers that can only keep or lengthen text, and the one that can shorten it: NFC
# and NFKC compose, and no canonical decomposition is longer than 4 code points, so at most
# 4 input characters become 1.
_KEEPS_LENGTH = {"NFD", "NFKD", "Lowercase", "Prepend"}
_COMPOSES = {"NFC", "NFKC"}
MAX_COMPOSITION = 4
# Pre-tokenizers that keep every character (Split and friends only when nothing is removed).
_KEEPS_TEXT = {"ByteLevel", "Metaspace", "Split", "Digits", "Punctuation", "UnicodeScripts"}


class LaneFull(RuntimeError):
    """The large lane holds its bound of characters; the request should retry later."""


@dataclass(frozen=True)
class PromptBound:
    """``max_chars_per_token``: the most input characters one token can stand for (None:
    the tokenizer gives no such bound and prompts are not bounded by length)."""

    max_chars_per_token: int | None = None

    def max_prompt_chars(self, max_context_tokens: int) -> int | None:
        """Characters beyond which a prompt cannot leave one token of room in the context:
        ``max_context_tokens - 1`` tokens stand for at most this many characters."""
        if self.max_chars_per_token is None:
            return None
        return max(0, max_context_tokens - 1) * self.max_chars_per_token


def max_chars_per_token(tokenizer: Any) -> int | None:
    """The most input characters one token of this ``tokenizers.Tokenizer`` can cover, or
    None where no sound bound is known: anything that may drop text (docs/server.md,
    "Tokenization")."""
    spec = json.loads(tokenizer.to_str())
    shrink = _normalizer_shrink(spec.get("normalizer"))
    if shrink is None or not _keeps_text(spec.get("pre_tokenizer")):
        return None
    model = spec.get("model") or {}
    byte_level = _has_byte_level(spec.get("pre_tokenizer"))
    if model.get("type") != "BPE" or not (byte_level or model.get("byte_fallback")):
        return None
    added = spec.get("added_tokens") or []
    if any(t.get("lstrip") or t.get("rstrip") for t in added):
        return None
    longest = max(
        [len(token) for token in model.get("vocab", {})]
        + [len(t.get("content", "")) for t in added],
        default=0,
    )
    return longest * shrink if longest else None


def _normalizer_shrink(spec: dict[str, Any] | None) -> int | None:
    if spec is None:
        return 1
    kind = spec.get("type")
    if kind == "Sequence":
        factor = 1
        for part in spec.get("normalizers", []):
            sub = _normalizer_shrink(part)
            if sub is None:
                return None
            factor *= sub
        return factor
    if kind in _COMPOSES:
        return MAX_COMPOSITION
    return 1 if kind in _KEEPS_LENGTH else None


def _keeps_text(spec: dict[str, Any] | None) -> bool:
    if spec is None:
        return True
    if spec.get("type") == "Sequence":
        return all(_keeps_text(p) for p in spec.get("pretokenizers", []))
    if spec.get("type") not in _KEEPS_TEXT:
        return False
    return str(spec.get("behavior", "Isolated")).lower() != "removed"


def _has_byte_level(spec: dict[str, Any] | None) -> bool:
    if spec is None:
        return False
    if spec.get("type") == "Sequence":
        return any(_has_byte_level(p) for p in spec.get("pretokenizers", []))
    return spec.get("type") == "ByteLevel"


class TokenizerLanes:
    """Runs tokenizer work by its cost in characters: small work on its own threads, large
    work bounded in concurrency and in characters admitted (see the module docstring)."""

    def __init__(
        self,
        max_queued_chars: int,
        small_chars: int = SMALL_CHARS,
        small_workers: int = SMALL_WORKERS,
        large_workers: int = LARGE_WORKERS,
    ) -> None:
        self.small_chars = small_chars
        self.max_queued_chars = max_queued_chars
        self._small = ThreadPoolExecutor(small_workers, thread_name_prefix="tokenize-small")
        self._large = ThreadPoolExecutor(large_workers, thread_name_prefix="tokenize-large")
        self._lock = threading.Lock()
        self.queued_chars = 0  # large work admitted and not finished

    def is_small(self, cost: int) -> bool:
        return cost <= self.small_chars

    async def run(self, cost: int, work: Callable[[], T]) -> T:
        """``work()`` on a lane thread; LaneFull when large work is at its bound, unless no
        other large work is queued. Cancelling the caller cancels work not yet started; the
        characters are released when the work ends either way."""
        if self.is_small(cost):
            return await asyncio.wrap_future(self._small.submit(work))
        with self._lock:
            if self.queued_chars and self.queued_chars + cost > self.max_queued_chars:
                raise LaneFull(
                    f"the tokenizer's queue for large prompts holds {self.queued_chars} "
                    f"characters (its bound is {self.max_queued_chars}); retry shortly"
                )
            self.queued_chars += cost
        future: Future[T] = self._large.submit(work)
        future.add_done_callback(lambda _f: self._release(cost))
        return await asyncio.wrap_future(future)

    def _release(self, cost: int) -> None:
        with self._lock:
            self.queued_chars -= cost

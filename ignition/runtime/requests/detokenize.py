"""Incremental detokenization with stop-string buffering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

REPLACEMENT = "\ufffd"
# How many already-emitted ids to re-decode so that merges across the boundary
# (a leading space, a multi-byte character) come out right.
CONTEXT_IDS = 6


class TextDecoder(Protocol):
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str: ...


@dataclass(frozen=True)
class TextDelta:
    """What one push publishes: visible text, and whether a stop string ended the output."""

    text: str
    stopped: bool = False
    stop_string: str | None = None
    # Of the ids pushed, how many the output keeps: all of them, or up to and including
    # the one that completed the stop string (usage counts no token past a stop).
    num_kept: int | None = None


class IncrementalDetokenizer:
    """Turns a growing list of output ids into visible text deltas."""

    def __init__(
        self,
        decoder: TextDecoder,
        stop: Sequence[str] = (),
        prompt_ids: Sequence[int] = (),
        skip_special_tokens: bool = True,
    ) -> None:
        self._decoder = decoder
        self._skip_special = skip_special_tokens
        self._stop = tuple(s for s in stop if s)
        # Seed the window with the prompt tail so the first output token decodes in context.
        self._ids: list[int] = list(prompt_ids[-CONTEXT_IDS:])
        self._prefix_offset = 0
        self._read_offset = len(self._ids)
        self._held = ""
        self._stopped = False
        self.text = ""

    @property
    def stopped(self) -> bool:
        return self._stopped

    def push(self, ids: Sequence[int], stoppable: bool = True) -> TextDelta:
        """Append newly committed output ids and return the text that may be shown."""
        if self._stopped:
            return TextDelta("", stopped=True, num_kept=0)
        if not stoppable or not self._stop:
            fresh = ""
            for token in ids:
                self._ids.append(int(token))
                fresh += self._decode_new()
            if stoppable:
                return replace(self._release(fresh), num_kept=len(ids))
            visible, self._held = self._held + fresh, ""
            self.text += visible
            return TextDelta(visible, num_kept=len(ids))
        # Token by token, so the stop is pinned to the id that completed it (a speculative
        # burst carries several ids; the ones after the stop are not output).
        visible = ""
        for i, token in enumerate(ids):
            self._ids.append(int(token))
            delta = self._release(self._decode_new())
            visible += delta.text
            if delta.stopped:
                return replace(delta, text=visible, num_kept=i + 1)
        return TextDelta(visible, num_kept=len(ids))

    def flush(self) -> TextDelta:
        """End of output: release held text (no stop can complete any more)."""
        if self._stopped:
            return TextDelta("", stopped=True)
        tail = self._held
        pending = self._decode(self._ids[self._prefix_offset :])
        emitted = self._decode(self._ids[self._prefix_offset : self._read_offset])
        if len(pending) > len(emitted):
            tail += pending[len(emitted) :]
        self._read_offset = len(self._ids)
        self._held = ""
        self.text += tail
        return TextDelta(tail)

    def _decode(self, ids: Sequence[int]) -> str:
        return self._decoder.decode(ids, skip_special_tokens=self._skip_special)

    def _decode_new(self) -> str:
        prefix = self._decode(self._ids[self._prefix_offset : self._read_offset])
        full = self._decode(self._ids[self._prefix_offset :])
        if len(full) <= len(prefix) or full.endswith(REPLACEMENT):
            return ""
        self._prefix_offset = max(self._read_offset - CONTEXT_IDS, 0)
        self._read_offset = len(self._ids)
        return full[len(prefix) :]

    def _release(self, fresh: str) -> TextDelta:
        pending = self._held + fresh
        hit = self._first_stop(pending)
        if hit is not None:
            index, stop = hit
            visible = pending[:index]
            self._held = ""
            self._stopped = True
            self.text += visible
            return TextDelta(visible, stopped=True, stop_string=stop)
        keep = self._stop_prefix_length(pending)
        visible = pending[: len(pending) - keep]
        self._held = pending[len(pending) - keep :]
        self.text += visible
        return TextDelta(visible)

    def _first_stop(self, text: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for stop in self._stop:
            index = text.find(stop)
            if index >= 0 and (best is None or index < best[0]):
                best = (index, stop)
        return best

    def _stop_prefix_length(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that starts some stop string."""
        longest = 0
        for stop in self._stop:
            for n in range(min(len(stop) - 1, len(text)), longest, -1):
                if stop.startswith(text[-n:]):
                    longest = n
                    break
        return longest

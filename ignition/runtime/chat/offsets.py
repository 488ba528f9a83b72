"""Where each message of a rendered chat ends, in prompt tokens, exactly."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence

EncodeBatch = Callable[[Sequence[str]], list[list[int]]]


def common_prefix(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    """How many leading ids of ``a`` equal ``b[start:]``, without copying ``b``."""
    n = min(len(a), len(b) - start)
    for i in range(n):
        if a[i] != b[start + i]:
            return i
    return n


class _Pieces:
    """The prompt cut at its split tokens, with the prompt token index of each cut."""

    def __init__(self, cuts: list[int], token_starts: list[int]) -> None:
        self.cuts = cuts  # character positions, ascending, starting at 0
        self.token_starts = token_starts  # prompt tokens before each cut

    @classmethod
    def of(
        cls,
        text: str,
        prompt_ids: Sequence[int],
        split_tokens: Sequence[str],
        encode_batch: EncodeBatch,
    ) -> _Pieces | None:
        """The cuts, or None when tokenizing the pieces one by one does not give the prompt."""
        if not split_tokens:
            return None
        pattern = "|".join(re.escape(t) for t in sorted(set(split_tokens), key=len, reverse=True))
        cuts = [0]
        for match in re.finditer(pattern, text):
            cuts.extend((match.start(), match.end()))
        cuts = sorted(set([*cuts, len(text)]))
        pieces = [text[a:b] for a, b in itertools.pairwise(cuts)]
        encoded = encode_batch(pieces)
        token_starts = [0]
        for ids in encoded:
            token_starts.append(token_starts[-1] + len(ids))
        if [t for ids in encoded for t in ids] != list(prompt_ids):
            return None
        return cls(cuts, token_starts)

    def last_cut(self, position: int) -> tuple[int, int]:
        """(character, prompt token index) of the last cut at or before ``position``."""
        k = bisect.bisect_right(self.cuts, position) - 1
        return self.cuts[k], self.token_starts[k]


def message_end_offsets(
    text: str,
    prompt_ids: Sequence[int],
    prefixes: Sequence[str | None],
    encode_batch: EncodeBatch,
    split_tokens: Sequence[str] = (),
) -> tuple[int, ...]:
    """The offset of each prefix (None: the template refused it) in ``prompt_ids``."""
    pieces = _Pieces.of(text, prompt_ids, split_tokens, encode_batch)
    work: list[tuple[int, str]] = []  # (prompt tokens already known equal, text to tokenize)
    for prefix in prefixes:
        if prefix is None:
            work.append((-1, ""))
        elif pieces is not None and text.startswith(prefix):
            cut, start = pieces.last_cut(len(prefix))
            work.append((start, text[cut : len(prefix)]))
        else:
            work.append((0, prefix))
    distinct = list(dict.fromkeys(t for known, t in work if known >= 0))
    encoded = dict(zip(distinct, encode_batch(distinct), strict=True))
    offsets: list[int] = []
    for known, tail in work:
        if known < 0:
            offsets.append(offsets[-1] if offsets else 0)
        else:
            offsets.append(known + common_prefix(encoded[tail], prompt_ids, known))
    return tuple(offsets)

"""Structured outputs: grammars compiled with xgrammar, and one host matcher per request.

Each frame's mask needs every earlier token on the host (completion feedback), and a
constrained row verifies only host drafts (its grammar's forced tokens); the full contract,
reasoning gates and the vocabulary rules are in docs/runtime.md ("runtime/grammar.py").
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ignition.runtime.proposals.source import MAX_PROPOSAL
from ignition.runtime.requests.errors import RequestError

if TYPE_CHECKING:
    import torch

CONTROL_BYTES = frozenset(range(0x20))
# A UTF-8-encoded surrogate (U+D800-U+DFFF): not UTF-8, though xgrammar 0.2.9 admits it
SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")
GRAMMAR_KINDS = ("json_schema", "json_object", "regex", "choice", "grammar", "structural_tag")
# What a request whose row emitted a token its grammar rejects is told (it cannot happen
# while the mask is applied; it guards the contract between worker and program).
GRAMMAR_REJECTED = "structured output failed: the model emitted a token the grammar forbids"

# The share of max_tokens a gated grammar's reasoning may take, its end tag included: the
# constrained reply after it keeps the rest (a forced tool call or a schema must fit in
# the reply's budget; half leaves a short schema or call several times its length).
REASONING_SHARE = 0.5


class GrammarError(RequestError):
    """A grammar that cannot be compiled; ``param`` names the request field, ``detail``
    says what xgrammar rejected (without the field)."""

    def __init__(self, message: str, param: str, detail: str = "") -> None:
        super().__init__(message)
        self.param = param
        self.detail = detail or message


@dataclass(frozen=True)
class GrammarSpec:
    """What a request asked for. ``source``: the JSON schema as JSON text, the regex, the
    choices as a JSON list, the EBNF grammar, or xgrammar's structural tag as JSON text (a
    forced tool call, server/tools/grammar.py) ('' for json_object); ``field``: the request
    field it came from (errors name it)."""

    kind: str
    source: str
    field: str
    # JSON between tokens: compact by default (one space after ':' and ','), since a model
    # allowed any whitespace can spend its whole budget on it; structured_outputs'
    # ``disable_any_whitespace: false`` allows it.
    any_whitespace: bool = False
    # A structural tag whose variable parts are JSON (a JSON-in-<tool_call> call): its mask
    # drops raw control bytes as JSON grammars' does, keeping the whitespace its tags hold.
    json_values: bool = False

    def __post_init__(self) -> None:
        if self.kind not in GRAMMAR_KINDS:
            raise GrammarError(f"unknown grammar kind {self.kind!r}", self.field)


@dataclass(frozen=True, eq=False)
class RequestGrammar:
    """A compiled grammar (xgrammar ``CompiledGrammar``) and the spec it came from;
    ``allowed``: a bitmask [words] int32 ANDed into every row (None: none)."""

    spec: GrammarSpec
    compiled: Any
    stop_ids: tuple[int, ...]
    allowed: Any = None
    # After a token ending in the lead byte 0xED, the tokens not starting with 0xA0-0xBF
    # (xgrammar 0.2.9 admits UTF-8-encoded surrogates, ED A0-BF xx, which are not UTF-8:
    # they would reach the text as three U+FFFD); and the ids that end in 0xED.
    after_ed: Any = None
    ends_in_ed: frozenset[int] = frozenset()
    # Token ids after which the grammar starts (a reasoning block's end tag, which the
    # output must reach first); (): from the first output token.
    gate: tuple[int, ...] = ()
    # The output length by which the gate must be complete: from ``gate_deadline -
    # len(gate)`` output tokens on, a still-gated row may write only the gate's next token.
    # None: the reasoning is not bounded (``within`` sets it from the request's budget).
    gate_deadline: int | None = None

    def within(self, max_tokens: int) -> RequestGrammar:
        """This grammar for a request of ``max_tokens``: a gate must be complete after
        REASONING_SHARE of them, so the constrained reply keeps the rest."""
        if not self.gate:
            return self
        return replace(self, gate_deadline=int(max_tokens * REASONING_SHARE))


class GrammarCompiler:
    """Compiles specs against one tokenizer; thread-safe, with xgrammar's cache."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: Iterable[int]) -> None:
        """``tokenizer``: a ``tokenizers.Tokenizer`` or a transformers tokenizer;
        ``vocab_size``: the model's (padded) vocabulary, the bitmask's width."""
        import xgrammar as xgr

        if not hasattr(tokenizer, "convert_ids_to_tokens"):  # a tokenizers.Tokenizer
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast(tokenizer_object=tokenizer)
        self.stop_ids = tuple(sorted(set(stop_ids)))
        self.vocab_size = vocab_size
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=list(self.stop_ids)
        )
        self._compiler = xgr.GrammarCompiler(info, max_threads=2)
        self._lock = threading.Lock()
        # JSON: tokens without raw control bytes, compact and with any whitespace
        vocab = info.decoded_vocab
        # No grammar's output may hold a surrogate inside one token (see RequestGrammar)
        self._text_tokens = _clean(vocab, vocab_size, lambda b: SURROGATE.search(b) is None)
        self._json_tokens = {
            ws: _without_bytes(vocab, vocab_size, CONTROL_BYTES - ws_bytes) & self._text_tokens
            for ws, ws_bytes in ((False, frozenset()), (True, frozenset(b"\t\n\r")))
        }
        self._after_ed = _clean(vocab, vocab_size, lambda b: not b or not 0xA0 <= b[0] <= 0xBF)
        self._ends_in_ed = frozenset(i for i, b in enumerate(vocab) if b[-1:] == b"\xed")

    def compile(self, spec: GrammarSpec) -> RequestGrammar:
        """The compiled grammar, or GrammarError naming ``spec.field``."""
        try:
            with self._lock:
                compiled = self._compile(spec)
        except GrammarError:
            raise
        except Exception as err:  # xgrammar reports bad schemas, regexes and EBNF as such
            detail = _message(err)
            message = f"{spec.field}: invalid {spec.kind} for structured outputs: {detail}"
            raise GrammarError(message, spec.field, detail) from None
        allowed = self._text_tokens
        if spec.kind in ("json_schema", "json_object"):
            allowed = self._json_tokens[spec.any_whitespace]
        elif spec.json_values:
            allowed = self._json_tokens[True]
        return RequestGrammar(
            spec, compiled, self.stop_ids, allowed, self._after_ed, self._ends_in_ed
        )

    def _compile(self, spec: GrammarSpec) -> Any:
        c = self._compiler
        if spec.kind == "json_object":  # OpenAI's JSON mode: any JSON object
            return c.compile_json_schema('{"type": "object"}', any_whitespace=spec.any_whitespace)
        if spec.kind == "json_schema":
            return c.compile_json_schema(spec.source, any_whitespace=spec.any_whitespace)
        if spec.kind == "regex":
            return c.compile_regex(spec.source)
        if spec.kind == "choice":
            choices = json.loads(spec.source)
            rule = " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)
            return c.compile_grammar(f"root ::= {rule}")
        if spec.kind == "structural_tag":
            return c.compile_structural_tag(spec.source)
        return c.compile_grammar(spec.source)


def _without_bytes(vocab: Sequence[bytes], vocab_size: int, banned: frozenset[int]) -> Any:
    """The bitmask [words] int32 of the ids whose bytes hold none of ``banned`` (xgrammar's
    layout: bit i % 32 of word i // 32); ids past the tokenizer's count as clean."""
    return _clean(vocab, vocab_size, lambda text: not banned.intersection(text))


def _clean(vocab: Sequence[bytes], vocab_size: int, keep: Callable[[bytes], bool]) -> Any:
    """The bitmask [words] int32 (xgrammar's layout) of the ids whose bytes ``keep``
    accepts; ids past the tokenizer's count as kept."""
    import numpy as np
    import torch

    words = (vocab_size + 31) // 32
    clean = np.ones(words * 32, dtype=bool)
    for token, text in enumerate(vocab[:vocab_size]):
        clean[token] = keep(text)
    packed = np.packbits(clean, bitorder="little").view("<u4").astype(np.int64)
    return torch.from_numpy(
        np.where(packed >= 1 << 31, packed - (1 << 32), packed).astype(np.int32)
    )


def _message(err: Exception) -> str:
    """xgrammar's first error line without its time stamp and C++ source location."""
    lines = str(err).strip().splitlines()
    if not lines:
        return type(err).__name__
    return re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", lines[0])


class LazyGrammarCompiler:
    """A GrammarCompiler opened at the first structured-output request, not at start-up:
    importing xgrammar imports transformers (seconds), which a server that is never asked
    for structured outputs should not pay (issue 11: serving does not import it)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: Iterable[int]) -> None:
        self._arguments = (tokenizer, vocab_size, tuple(stop_ids))
        self._compiler: GrammarCompiler | None = None
        self._why: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def unavailable(cls, why: str) -> LazyGrammarCompiler:
        """One that answers every grammar request with GrammarError(why)."""
        lazy = cls(None, 0, ())
        lazy._why = f"this server has no structured outputs: {why}"
        return lazy

    def compile(self, spec: GrammarSpec) -> RequestGrammar:
        with self._lock:
            if self._compiler is None and self._why is None:
                self._compiler, self._why = _open(*self._arguments)
        if self._compiler is None:
            raise GrammarError(f"{spec.field}: {self._why}", spec.field)
        return self._compiler.compile(spec)


def _open(
    tokenizer: Any, vocab_size: int, stop_ids: Iterable[int]
) -> tuple[GrammarCompiler | None, str | None]:
    """(the compiler, None), or (None, why) when xgrammar is missing or cannot read the
    tokenizer: structured-output requests are then a 400 saying so."""
    try:
        return GrammarCompiler(tokenizer, vocab_size, stop_ids), None
    except ImportError as err:
        return None, f"this server has no structured outputs: {err} (pip install xgrammar)"
    except Exception as err:  # a tokenizer xgrammar cannot read
        why = f"xgrammar cannot read the tokenizer: {_message(err)}"
        return None, f"this server has no structured outputs: {why}"


class GrammarState:
    """One request's matcher: the bitmask before each frame, the tokens after it."""

    def __init__(self, grammar: RequestGrammar, history: Sequence[int] = ()) -> None:
        """``history``: output tokens the request already has (a restart's replayed output),
        accepted first so the matcher continues where the request is."""
        import xgrammar as xgr

        self.grammar = grammar
        self.matcher = xgr.GrammarMatcher(grammar.compiled)
        self.is_broken = False
        self.is_gated = bool(grammar.gate)  # still before the gate: nothing constrained
        self._recent: list[int] = []  # the last len(gate) tokens while gated
        self._after_ed = False  # the last token ended in the lead byte 0xED
        self._forced: tuple[int, ...] | None = None  # forced_drafts' answer, until accept
        self._num_tokens = 0  # output tokens accepted (the history's included)
        for token in history:
            self.accept(token)

    @property
    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed tokens of the next position into ``bitmask[row]`` ([rows,
        words] int32 on the host): the grammar's, or only EOS once it has ended."""
        if self.is_gated:
            forced = self._gate_token()
            if forced is not None:
                bitmask[row].zero_()
                _set_bits(bitmask, row, (forced,), True)
            else:  # free reasoning, but no end of sequence before the constrained reply
                bitmask[row].fill_(-1)
                _set_bits(bitmask, row, self.grammar.stop_ids, False)
            return
        if self.is_terminated or self.is_broken:
            bitmask[row].zero_()
            _set_bits(bitmask, row, self.grammar.stop_ids, True)
            return
        self.matcher.fill_next_token_bitmask(bitmask, row)
        if self.grammar.allowed is not None:
            bitmask[row] &= self.grammar.allowed
        if self._after_ed and self.grammar.after_ed is not None:
            bitmask[row] &= self.grammar.after_ed

    def forced_drafts(self) -> tuple[int, ...]:
        """The tokens the grammar forces after the last accepted one (xgrammar's jump-forward
        tokens: the forced bytes in the vocabulary's longest tokens), at most MAX_PROPOSAL;
        () while gated or once ended. Drafts, not outputs: the model may spell the forced
        text with other tokens, and verification keeps only what it samples."""
        if self._forced is None:
            if self.is_gated:  # the rest of the gate once its deadline forces it
                forcing = self._gate_token() is not None
                forced = self.grammar.gate[self._gate_progress() :] if forcing else ()
            elif self.is_terminated or self.is_broken:
                forced = ()
            else:
                forced = self.matcher.find_jump_forward_tokens()
            self._forced = tuple(int(t) for t in forced[:MAX_PROPOSAL])
        return self._forced

    def _gate_token(self) -> int | None:
        """The gate's next token when its deadline forces it now; None: free."""
        deadline, gate = self.grammar.gate_deadline, self.grammar.gate
        if deadline is None or self._num_tokens < deadline - len(gate):
            return None
        return gate[self._gate_progress()]

    def _gate_progress(self) -> int:
        """How many of the gate's first tokens the output ends with (fewer than all)."""
        gate, recent = self.grammar.gate, self._recent
        for k in range(min(len(gate) - 1, len(recent)), 0, -1):
            if tuple(recent[-k:]) == gate[:k]:
                return k
        return 0

    def fill_positions(self, masks: torch.Tensor, drafts: Sequence[int]) -> int:
        """Write the mask of each verification position into ``masks`` ([W, words] int32 on
        the host): row 0 for the token after the last accepted one, row j after drafts
        1..j as well; returns how many drafts (at most W - 1) the masks admit, the walk
        stopping before the first they forbid. The matcher is rolled back: the state is
        as before the call."""
        self.fill(masks, 0)
        saved = (
            self.is_gated,
            self._recent,
            self._after_ed,
            self.is_broken,
            self._forced,
            self._num_tokens,
        )
        num_kept = num_steps = 0  # drafts walked; tokens the xgrammar matcher accepted
        for token in drafts[: masks.shape[0] - 1]:
            word, bit = divmod(int(token), 32)
            if word >= masks.shape[1] or not (int(masks[num_kept, word]) >> bit) & 1:
                break
            steps = not self.is_gated and not self.is_terminated
            if not self.accept(token):
                break
            num_steps += steps
            num_kept += 1
            self.fill(masks, num_kept)
        if num_steps:
            self.matcher.rollback(num_steps)
        (
            self.is_gated,
            self._recent,
            self._after_ed,
            self.is_broken,
            self._forced,
            self._num_tokens,
        ) = saved
        return num_kept

    def accept(self, token: int) -> bool:
        """Advance by one emitted token; False when the grammar forbids it."""
        self._forced = None
        self._num_tokens += 1
        if self.is_gated:
            gate = self.grammar.gate
            self._recent = [*self._recent, int(token)][-len(gate) :]
            self.is_gated = tuple(self._recent) != gate
            return True
        if self.is_terminated:
            ok = token in self.grammar.stop_ids
        else:
            ok = bool(self.matcher.accept_token(int(token)))
        self.is_broken |= not ok
        self._after_ed = int(token) in self.grammar.ends_in_ed
        return ok


def _set_bits(bitmask: torch.Tensor, row: int, tokens: Iterable[int], on: bool) -> None:
    """Set (``on``) or clear the bits of ``tokens`` in ``bitmask[row]`` (int32 words, bit
    i % 32 of word i // 32); ids past the mask's width are skipped."""
    for token in tokens:
        word, bit = divmod(int(token), 32)
        if word >= bitmask.shape[1]:
            continue
        value = int(bitmask[row, word]) & 0xFFFFFFFF
        value = value | (1 << bit) if on else value & ~(1 << bit)
        bitmask[row, word] = value - (1 << 32) if value >= 1 << 31 else value

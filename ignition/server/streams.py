"""From engine streams to OpenAI bodies: one JSON body, or SSE ``data:`` lines merging one
engine stream per choice; a disconnect cancels them all, and a failed choice still ends
its stream (docs/server.md, "Streams").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from ignition.runtime.requests.request import (
    GenerationRequest,
    PromptLogprob,
    StreamChunk,
    TokenLogprob,
)
from ignition.server.body import error_body, now_s, usage
from ignition.server.logprobs import (
    CompletionLogprobs,
    TokenText,
    chat_logprobs,
    cumulative_logprob,
    echoed_prompt_logprobs,
    joined,
    prompt_logprobs_body,
)
from ignition.server.metrics import ServerMetrics
from ignition.server.tools.output import ReplyParser


class Relay:
    """Observes publication latency as chunks reach the client."""

    def __init__(self, metrics: ServerMetrics, arrival: float) -> None:
        self._metrics = metrics
        self._last: float | None = None
        self._arrival = arrival

    def saw(self, chunk: StreamChunk) -> None:
        if chunk.finish_reason is not None:
            self._metrics.observe_finished(time.monotonic() - self._arrival)
        if not chunk.text and not chunk.token_ids:
            return
        now = time.monotonic()
        if self._last is None:
            self._metrics.time_to_first_token.observe(now - self._arrival)
        else:
            self._metrics.inter_token.observe(now - self._last)
        self._last = now


@dataclass
class Choice:
    """One engine stream of a response."""

    index: int
    prompt_index: int
    request: GenerationRequest
    stream: AsyncIterator[StreamChunk]
    relay: Relay
    echo: str = ""
    # Alternatives per token the response shows; None: the response shows no logprobs.
    num_logprobs: int | None = None
    # Completions' echo with logprobs: the legacy logprobs start with the prompt's tokens.
    echo_scores: bool = False
    # Chat with a reasoning or tool-call parser: the reply becomes message fields.
    reply: ReplyParser | None = None
    last: StreamChunk | None = field(default=None, init=False)
    # The prompt logprobs the engine's first chunk carried (when the request asked).
    prompt_scores: tuple[PromptLogprob | None, ...] | None = field(default=None, init=False)

    @property
    def shows_prompt_logprobs(self) -> bool:
        return self.request.sampling.prompt_logprobs is not None

    @property
    def num_prompt(self) -> int:
        return self.last.num_prompt_tokens if self.last else len(self.request.prompt_ids)

    @property
    def num_output(self) -> int:
        return self.last.num_output_tokens if self.last else 0

    @property
    def num_cached(self) -> int:
        return self.last.num_cached_tokens if self.last else 0


async def _chunks(choice: Choice):
    """Relay one engine stream; closing this generator (a disconnect) cancels it."""
    try:
        async for chunk in choice.stream:
            choice.relay.saw(chunk)
            choice.last = chunk
            if chunk.prompt_logprobs is not None:
                choice.prompt_scores = chunk.prompt_logprobs
            yield chunk
    finally:
        await choice.stream.aclose()  # type: ignore[attr-defined]


def total_usage(choices: list[Choice]) -> dict[str, int]:
    """Prompt (and cached prompt) tokens count once per prompt, output tokens once per choice."""
    prompts = {c.prompt_index: (c.num_prompt, c.num_cached) for c in choices}
    return usage(
        sum(p for p, _ in prompts.values()),
        sum(c.num_output for c in choices),
        sum(cached for _, cached in prompts.values()),
    )


async def close_all(choices: list[Choice]) -> None:
    for choice in choices:
        with contextlib.suppress(Exception):
            await choice.stream.aclose()  # type: ignore[attr-defined]


def _choice_body(
    chat: bool,
    index: int,
    text: str,
    finish: str | None,
    stop_reason,
    delta: bool,
    logprobs: dict[str, Any] | None = None,
    parsed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``parsed``: a chat choice's parsed ``delta`` or ``message`` (server/tools/), which
    replaces the plain text one."""
    body: dict[str, Any] = {"index": index}
    if not chat:
        body["text"] = text
    elif parsed is not None:
        body["delta" if delta else "message"] = parsed
    elif delta:
        body["delta"] = {"content": text} if text else {}
    else:
        body["message"] = {"role": "assistant", "content": text}
    body.update(logprobs=logprobs, finish_reason=finish)
    if finish is not None:
        body["stop_reason"] = stop_reason
    return body


async def _until_disconnected(raw: Request, poll_s: float = 0.05) -> None:
    while not await raw.is_disconnected():
        await asyncio.sleep(poll_s)


async def collect_or_cancel(raw: Request, work) -> dict[str, Any] | None:
    """Run a non-streaming collection, abandoning it (and the requests) if the client leaves."""
    collect = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_disconnected(raw))
    try:
        done, _ = await asyncio.wait({collect, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if collect in done:
        return collect.result()
    collect.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await collect
    return None


def _logprobs_body(
    choice: Choice, items: list[TokenLogprob], chat: bool, token_text: TokenText, state
) -> dict[str, Any] | None:
    if choice.num_logprobs is None:
        return None
    if chat:
        return chat_logprobs(items, token_text, choice.num_logprobs)
    return state.body(items)


def _completion_state(choice: Choice, token_text: TokenText) -> CompletionLogprobs:
    return CompletionLogprobs(token_text, choice.num_logprobs or 0, len(choice.echo))


def _echo_body(choice: Choice, token_text: TokenText) -> dict[str, Any] | None:
    """The echoed prompt's legacy logprobs (echo with logprobs), None otherwise."""
    if not choice.echo_scores or choice.prompt_scores is None:
        return None
    ids = choice.request.prompt_ids
    return echoed_prompt_logprobs(ids, choice.prompt_scores, token_text, choice.num_logprobs or 0)


async def collect(
    response_id: str,
    choices: list[Choice],
    chat: bool,
    model: str,
    token_text: TokenText | None = None,
    keep_best: int | None = None,
) -> dict:
    """One response body. ``keep_best`` (best_of > n): of each prompt's candidates, keep
    the ``keep_best`` with the highest cumulative logprob, best first."""
    token_text = token_text or str

    async def one(choice: Choice) -> tuple[str, StreamChunk | None, list[TokenLogprob]]:
        text = choice.echo
        items: list[TokenLogprob] = []
        async for chunk in _chunks(choice):
            text += chunk.text
            items += chunk.logprobs
        return text, choice.last, items

    try:
        results = await asyncio.gather(*(one(c) for c in choices))
    finally:
        await close_all(choices)
    for last in (r[1] for r in results):
        if last is not None and last.error:
            return error_body(last.error, "server_error")
    ranked = list(zip(choices, results, strict=True))
    if keep_best is not None:
        by_prompt: dict[int, list] = {}
        for cr in ranked:
            by_prompt.setdefault(cr[0].prompt_index, []).append(cr)
        ranked = [
            cr
            for p in sorted(by_prompt)
            for cr in sorted(by_prompt[p], key=lambda cr: -cumulative_logprob(cr[1][2]))[:keep_best]
        ]
    for choice, (text, _last, _items) in ranked:
        if choice.reply is not None:
            choice.reply.step(text, final=True)
            if choice.reply.failure is not None:
                return error_body(f"tool_choice: {choice.reply.failure}", "server_error")
    bodies = []
    for position, (choice, (text, last, items)) in enumerate(ranked):
        finish = _finish_reason(choice, (last.finish_reason if last else None) or "stop")
        stop_reason = last.stop_reason if last else None
        index = position if keep_best is not None else choice.index
        logprobs = _logprobs_body(
            choice, items, chat, token_text, _completion_state(choice, token_text)
        )
        echoed = _echo_body(choice, token_text)
        if echoed is not None and logprobs is not None:
            logprobs = joined(echoed, logprobs)
        message = choice.reply.message() if choice.reply is not None else None
        body = _choice_body(chat, index, text, finish, stop_reason, False, logprobs, message)
        if not chat and choice.shows_prompt_logprobs:
            body["prompt_logprobs"] = prompt_logprobs_body(choice.prompt_scores or (), token_text)
        bodies.append(body)
    response = {
        "id": response_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": now_s(),
        "model": model,
        "choices": bodies,
        "usage": total_usage(choices),
    }
    if chat and choices and choices[0].shows_prompt_logprobs:  # vLLM: on the response
        response["prompt_logprobs"] = prompt_logprobs_body(
            choices[0].prompt_scores or (), token_text
        )
    return response


def _finish_reason(choice: Choice, finish: str | None) -> str | None:
    """A reply that ended by itself after calling tools finishes with "tool_calls"."""
    if finish == "stop" and choice.reply is not None and choice.reply.calls:
        return "tool_calls"
    return finish


def _event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


async def sse(
    response_id: str,
    choices: list[Choice],
    chat: bool,
    model: str,
    include_usage: bool,
    continuous_usage: bool,
    token_text: TokenText | None = None,
):
    token_text = token_text or str
    offsets = {c.index: _completion_state(c, token_text) for c in choices}
    base = {
        "id": response_id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": now_s(),
        "model": model,
    }
    queue: asyncio.Queue[tuple[Choice, StreamChunk | None]] = asyncio.Queue()

    async def pump(choice: Choice) -> None:
        try:
            async for chunk in _chunks(choice):
                queue.put_nowait((choice, chunk))
        finally:
            queue.put_nowait((choice, None))

    tasks = [asyncio.ensure_future(pump(c)) for c in choices]
    try:
        for choice in choices:
            if chat:
                opening = {"index": choice.index, "delta": {"role": "assistant"}}
                opening.update(logprobs=None, finish_reason=None)
                yield _event({**base, "choices": [opening]})
            elif choice.echo and not choice.echo_scores:
                body = _choice_body(False, choice.index, choice.echo, None, None, True)
                yield _event({**base, "choices": [body]})
        # Echo with logprobs: the echo waits for the prompt's logprobs (the first chunk).
        echo_pending = {c.index for c in choices if c.echo and c.echo_scores}
        num_open = len(choices)
        while num_open:
            choice, chunk = await queue.get()
            if chunk is None:
                num_open -= 1
                continue
            if choice.index in echo_pending and not chunk.error:
                echo_pending.discard(choice.index)
                logprobs = _echo_body(choice, token_text)
                body = _choice_body(False, choice.index, choice.echo, None, None, True, logprobs)
                yield _event({**base, "choices": [body]})
            if chunk.error:
                yield _event(error_body(chunk.error, "server_error"))
                body = _choice_body(chat, choice.index, "", "error", None, True)
                yield _event({**base, "choices": [body]})
                break
            shows_logprobs = choice.num_logprobs is not None and bool(chunk.logprobs)
            parsed, visible = None, bool(chunk.text)
            if choice.reply is not None:
                final = chunk.finish_reason is not None
                parsed = choice.reply.step(chunk.text, final).body()
                visible = bool(parsed)
                if choice.reply.failure is not None:
                    yield _event(error_body(f"tool_choice: {choice.reply.failure}", "server_error"))
                    body = _choice_body(chat, choice.index, "", "error", None, True)
                    yield _event({**base, "choices": [body]})
                    break
            if not (visible or chunk.finish_reason or continuous_usage or shows_logprobs):
                continue
            logprobs = None
            if shows_logprobs:
                logprobs = _logprobs_body(
                    choice, list(chunk.logprobs), chat, token_text, offsets[choice.index]
                )
            body = _choice_body(
                chat,
                choice.index,
                chunk.text,
                _finish_reason(choice, chunk.finish_reason),
                chunk.stop_reason,
                True,
                logprobs,
                parsed,
            )
            payload = {**base, "choices": [body]}
            if continuous_usage:
                payload["usage"] = usage(
                    chunk.num_prompt_tokens, chunk.num_output_tokens, chunk.num_cached_tokens
                )
            yield _event(payload)
        if include_usage:
            yield _event({**base, "choices": [], "usage": total_usage(choices)})
        yield "data: [DONE]\n\n"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await close_all(choices)

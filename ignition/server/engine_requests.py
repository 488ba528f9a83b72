"""What one completion or chat body asks the engine for: its compiled grammar, and one
:class:`GenerationRequest` per (prompt, choice) with its sampling checked against the
context. Each refusal is an ApiError (a 400) naming the field."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ignition.runtime.grammar import GrammarError, RequestGrammar
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import GenerationRequest
from ignition.runtime.vision.inputs import RequestImages
from ignition.server.chat_protocol import ChatCompletionRequest
from ignition.server.door import Door
from ignition.server.engine_client import EngineClient
from ignition.server.errors import ApiError
from ignition.server.protocol import CompletionRequest
from ignition.server.tools.choice import ReplyPlan
from ignition.server.tools.grammar import tool_error


async def request_grammar(
    engine: EngineClient,
    body: CompletionRequest | ChatCompletionRequest,
    after: str | None = None,
    plan: ReplyPlan | None = None,
) -> RequestGrammar | None:
    """The request's compiled structured-output grammar (None: free text): a forced
    tool call's (``plan``) or the request's own, starting after ``after``'s tokens when
    given; one that cannot be compiled is a 400 naming its field (for a forced call,
    the tool whose schema failed). Compiled off the event loop."""
    forced = plan.grammar_spec(after_reasoning=bool(after)) if plan is not None else None
    spec = forced or body.grammar_spec()
    if spec is None:
        return None
    try:
        grammar = await asyncio.to_thread(engine.compile_grammar, spec)
    except GrammarError as err:
        if forced is not None and plan is not None and plan.tools is not None:
            err = await asyncio.to_thread(
                tool_error, engine.compile_grammar, plan.tools, plan.declared, err
            )
        raise ApiError(400, str(err), param=err.param) from None
    if after:
        gate = engine.encode(after, add_special_tokens=False)  # the tag's own tokens
        grammar = replace(grammar, gate=tuple(gate))
    return grammar


def build_requests(
    engine: EngineClient,
    door: Door,
    body: CompletionRequest | ChatCompletionRequest,
    prompt_ids: list[list[int]],
    response_id: str,
    ends: tuple[int, ...] = (),
    images: RequestImages | None = None,
    grammar: RequestGrammar | None = None,
) -> list[tuple[int, GenerationRequest]]:
    """One engine request per (prompt, choice); seeds differ per choice. ``ends`` are a
    chat prompt's message end offsets (checkpoint retention anchors on them)."""
    door.ids(body.stop_token_ids or (), "stop_token_ids")
    requests = []
    for prompt_index, ids in enumerate(prompt_ids):
        room = engine.max_context_tokens - len(ids)
        if room < 1:
            raise ApiError(
                400,
                f"the prompt has {len(ids)} tokens; this model's context is "
                f"{engine.max_context_tokens} tokens, which leaves no room for output",
                param="prompt" if not isinstance(body, ChatCompletionRequest) else "messages",
            )
        try:
            sampling = body.sampling(min(engine.default_max_tokens, room), engine.vocab_size)
        except RequestError as err:
            raise ApiError(400, str(err)) from None
        except ValueError as err:  # a logit_bias key outside the vocabulary
            raise ApiError(400, str(err), param="logit_bias") from None
        try:
            sampling = engine.generation_defaults.apply(sampling, _given(body))
        except RequestError as err:
            raise ApiError(400, str(err)) from None
        if grammar is not None:  # a reasoning gate closes in time for the reply
            sampling = replace(sampling, grammar=grammar.within(sampling.max_tokens))
        if sampling.max_tokens > room:
            raise ApiError(
                400,
                f"max_tokens = {sampling.max_tokens} with a {len(ids)}-token prompt "
                f"exceeds the context of {engine.max_context_tokens} tokens",
                param="max_tokens",
            )
        count = body.num_candidates
        for j in range(count):
            seeded = sampling
            if sampling.seed is not None and j:
                seeded = replace(sampling, seed=sampling.seed + j)
            request_id = f"{response_id}-{prompt_index * count + j}"
            requests.append(
                (
                    prompt_index,
                    GenerationRequest(
                        request_id,
                        tuple(ids),
                        seeded,
                        message_end_offsets=tuple(ends),
                        images=images,
                    ),
                )
            )
    return requests


def _given(body: CompletionRequest | ChatCompletionRequest) -> set[str]:
    """Sampling fields the client set; the others take the checkpoint's generation defaults."""
    return {name for name in body.model_fields_set if getattr(body, name) is not None}

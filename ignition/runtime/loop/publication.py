"""Publication: a completed frame's tokens become text, stop conditions and client chunks."""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from dataclasses import replace

from ignition.helios import CompletionRecord, Fence, GeneratedToken, RequestHandle, ScheduledPlan
from ignition.runtime.executors.frames import FrameResult
from ignition.runtime.loop.hooks import Live, LoopHook, LoopHooks
from ignition.runtime.loop.lifecycle import Lifecycle, deliver, retired_in
from ignition.runtime.requests.errors import RequestError
from ignition.runtime.requests.request import (
    GenerationRequest,
    PromptLogprob,
    StreamChunk,
    TokenLogprob,
)
from ignition.runtime.requests.table import LiveRequest

log = logging.getLogger("ignition.engine")


def check_prompt_scoring(request: GenerationRequest, worker: object) -> None:
    """Refuse at submit prompt logprobs the worker cannot score."""
    if request.images is not None:
        raise RequestError("prompt_logprobs are not supported for prompts with images")
    if getattr(worker, "score_prompt", None) is None:
        raise RequestError("prompt_logprobs are not supported by this engine's worker")


class HeldFinishes(LoopHook):
    """Ends the requests whose finish waited for their terminal snapshot."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self.lifecycle = lifecycle

    def after_publish(self, plan: ScheduledPlan, live: Live) -> None:
        for request in retired_in(plan, live):
            # A preempted request's snapshot is preemption's (it resumes, not finishes).
            if request.preempting or request.is_done or request.pending_finish is None:
                continue
            self.lifecycle.finish(request, request.pending_finish, notify_scheduler=False)


class Publisher:
    """The engine's publication step (docs/runtime.md)."""

    def __init__(self, lifecycle: Lifecycle, hooks: LoopHooks) -> None:
        self.lifecycle = lifecycle
        self.table = lifecycle.table
        self.stats = lifecycle.stats
        self.hooks = hooks

    def record_frame(self, plan: ScheduledPlan, result: FrameResult) -> None:
        """Count a completed frame's drafts and prompt tokens and file its prompt scores."""
        for i, offered in enumerate(result.num_offered_drafts):
            if offered > 0:
                record = result.records[i]
                accepted = max(0, len(record.token_ids) - 1)
                # the source its round used (runtime/proposals): "mtp" (the only
                # learned-proposal draws), "ngram" (copies) or "grammar" (forced drafts)
                source = plan.lanes[i].proposal_source.name
                self.stats.record_speculation(offered, accepted, source)
        for record in result.records:
            live = self.table.live.get(record.handle)
            if live is not None and record.num_prompt_tokens:
                live.num_prompt_consumed += record.num_prompt_tokens
                self.stats.record_tokens(record.num_prompt_tokens, 0)
        self.keep_prompt_scores(result.prompt_logprobs)

    def keep_prompt_scores(
        self, scored: dict[RequestHandle, tuple[int, tuple[PromptLogprob, ...]]]
    ) -> None:
        """File a frame's scored prompt positions by prompt token index."""
        for handle, (start, entries) in scored.items():
            live = self.table.live.get(handle)
            if live is not None:
                for i, entry in enumerate(entries):
                    live.prompt_scores[start + 1 + i] = entry

    def _take_prompt_scores(self, live: LiveRequest) -> tuple[PromptLogprob | None, ...] | None:
        """The request's prompt logprobs, once (its first chunk)."""
        if live.request.sampling.prompt_logprobs is None or live.prompt_scores_sent:
            return None
        live.prompt_scores_sent = True
        num_prompt = len(live.request.prompt_ids)
        missing = [i for i in range(1, num_prompt) if i not in live.prompt_scores]
        if missing:  # a contract violation: every prompt chunk runs before the first output
            raise RuntimeError(f"prompt logprobs missing at {len(missing)} positions")
        return (None, *(live.prompt_scores[i] for i in range(1, num_prompt)))

    def publish(
        self,
        fence: Fence,
        tokens: list[GeneratedToken],
        records: Sequence[CompletionRecord],
        logprobs: dict[RequestHandle, tuple[TokenLogprob, ...]] | None = None,
    ) -> None:
        finished_by_record = {r.handle: r.is_finished for r in records}
        grouped: dict[RequestHandle, list[GeneratedToken]] = collections.defaultdict(list)
        for token in tokens:
            grouped[token.handle].append(token)
        for handle, items in grouped.items():
            live = self.table.live.get(handle)
            if live is None or live.is_done:
                continue
            try:
                finished = bool(finished_by_record.get(handle))
                lps = (logprobs or {}).get(handle, ())
                self._publish_request(live, fence, items, finished, lps)
            except Exception as err:  # one request's text failing ends that request only
                message = f"publication failed: {type(err).__name__}: {err}"
                log.error("%s: %s", live.request.request_id, message, exc_info=err)
                if not live.is_done:
                    self.lifecycle.finish(live, "error", notify_scheduler=True, error=message)

    def _publish_request(
        self,
        live: LiveRequest,
        fence: Fence,
        items: list[GeneratedToken],
        is_finished: bool,
        logprobs: Sequence[TokenLogprob] = (),
    ) -> None:
        for before_publish in self.hooks.before_publish:
            before_publish(live)
        ids = [t.token_id for t in items]
        # The frame's logprobs cover what the device emitted; Helios publishes a prefix.
        lps = list(logprobs[: len(ids)])
        if [lp.token_id for lp in lps] != ids:
            lps = []
        is_last = items[-1].is_last
        stop_ids = live.request.sampling.stop_token_ids
        stop_id = next((t for t in ids if t in stop_ids), None) if stop_ids else None
        if stop_id is not None:
            ids = ids[: ids.index(stop_id) + 1]
        shown = ids[:-1] if stop_id is not None else ids
        # As vLLM: stop strings count only once min_tokens tokens exist (the device already
        # holds EOS and stop token ids back until then).
        early = max(0, live.request.sampling.min_tokens - len(live.output_ids))
        if early:
            held = live.detokenizer.push(shown[:early], stoppable=False)
            delta = live.detokenizer.push(shown[early:])
            delta = replace(delta, text=held.text + delta.text)
            num_kept = len(shown[:early]) + (delta.num_kept or 0)
        else:
            delta = live.detokenizer.push(shown)
            num_kept = delta.num_kept or 0
        if delta.stopped:  # the ids after the one that completed the stop are not output
            ids = ids[:num_kept]
        lps = lps[: len(ids)]
        live.output_ids += ids
        self.stats.record_tokens(0, len(ids))
        if live.probation_output is not None and len(live.output_ids) > live.probation_output:
            live.probation_output = None
        if delta.stopped:
            text = delta.text
            if live.request.sampling.include_stop_str_in_output and delta.stop_string:
                text += delta.stop_string
            self._emit(live, fence, text, ids, lps)
            self.lifecycle.finish(
                live, "stop", notify_scheduler=not is_last, stop_reason=delta.stop_string
            )
        elif stop_id is not None:
            text = delta.text + live.detokenizer.flush().text
            self._emit(live, fence, text, ids, lps)
            self.lifecycle.finish(live, "stop", notify_scheduler=not is_last, stop_reason=stop_id)
        elif is_last:
            text = delta.text + live.detokenizer.flush().text
            self._emit(live, fence, text, ids, lps)
            reason = "stop" if is_finished else "length"
            if self.lifecycle.retention.hold_for_terminal(live, self.lifecycle.now_ns()):
                live.pending_finish = reason  # the terminal snapshot completes it
            else:
                self.lifecycle.finish(live, reason, notify_scheduler=False)
        else:
            self._emit(live, fence, delta.text, ids, lps)

    def _emit(
        self,
        live: LiveRequest,
        fence: Fence,
        text: str,
        ids: list[int],
        logprobs: Sequence[TokenLogprob] = (),
    ) -> None:
        """Hand a burst to the client; only visible text counts as a delivery."""
        if not text and not ids:
            return
        if live.first_token_ns is None:
            live.first_token_ns = self.lifecycle.clock_ns()
        num_prompt = len(live.request.prompt_ids)
        chunk = StreamChunk(
            text,
            tuple(ids),
            num_prompt,
            len(live.output_ids),
            num_cached_tokens=live.num_cached_tokens,
            logprobs=tuple(logprobs),
            prompt_logprobs=self._take_prompt_scores(live),
        )
        deliver(live.sink, chunk)
        if text:
            self.lifecycle.scheduler.published_output(live.handle, fence)

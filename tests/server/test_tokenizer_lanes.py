"""Issue 24, defect 3: prompt size is bounded before tokenizing, and a small request never
waits behind large ones for the tokenizer.

Latency is shown by ordering, not by clocks: large prompts block inside the tokenizer
until the test releases them, and the small request must finish while all of them are
still blocked. benchmarks/tokenizer_lanes.py prints the measured times.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from ignition.server.config import ServerConfig
from ignition.server.tokenizing import SMALL_CHARS, PromptBound, TokenizerLanes, max_chars_per_token
from tests.checkpoints import write_tiny_checkpoint
from tests.server.scripted import ScriptedEngine, client, run

BIG = "x" * (SMALL_CHARS + 1)


class GatedEncoder(ScriptedEngine):
    """Large texts block in encode until ``release`` is set; counts what entered encode."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.large_started = 0
        self.large_finished = 0
        self.lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        if len(text) <= SMALL_CHARS:
            return super().encode(text)
        with self.lock:
            self.large_started += 1
        self.release.wait(timeout=30)
        with self.lock:
            self.large_finished += 1
        return super().encode(text[:8])


def test_a_small_request_finishes_while_many_large_prompts_hold_the_tokenizer():
    """40 large prompts: more than the default executor's threads on any machine (32)."""
    engine = GatedEncoder()

    async def go():
        async with client(engine) as c:
            large = [
                asyncio.ensure_future(c.post("/v1/completions", json={"prompt": BIG}))
                for _ in range(40)
            ]
            while engine.large_started == 0:
                await asyncio.sleep(0.01)
            small = await c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 4})
            finished_before_small = engine.large_finished
            engine.release.set()
            return small, finished_before_small, await asyncio.gather(*large)

    small, finished_before_small, large = run(go())
    assert small.status_code == 200
    assert finished_before_small == 0  # the small request overtook every large one
    assert all(r.status_code == 200 for r in large)


def test_large_prompts_run_one_at_a_time_in_their_lane():
    engine = GatedEncoder()

    async def go():
        async with client(engine) as c:
            large = [
                asyncio.ensure_future(c.post("/v1/completions", json={"prompt": BIG}))
                for _ in range(4)
            ]
            while engine.large_started == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # time for a second one to start, were that allowed
            started = engine.large_started
            engine.release.set()
            await asyncio.gather(*large)
            return started

    assert run(go()) == 1


def test_large_work_beyond_the_lane_bound_is_a_503_with_retry_after():
    engine = GatedEncoder()
    config = ServerConfig(max_queued_tokenizer_chars=2 * len(BIG))

    async def go():
        async with client(engine, config) as c:
            held = [
                asyncio.ensure_future(c.post("/v1/completions", json={"prompt": BIG}))
                for _ in range(2)
            ]
            while engine.large_started == 0:
                await asyncio.sleep(0.01)
            refused = await c.post("/v1/completions", json={"prompt": BIG})
            small = await c.post("/v1/completions", json={"prompt": "hi"})
            engine.release.set()
            return refused, small, await asyncio.gather(*held)

    refused, small, held = run(go())
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert "tokenizer" in refused.json()["error"]["message"]
    assert small.status_code == 200  # the small lane has no such bound
    assert [r.status_code for r in held] == [200, 200]


def test_one_request_above_the_bound_is_admitted_when_the_lane_is_empty():
    lanes = TokenizerLanes(max_queued_chars=10, small_chars=1)

    async def go():
        return await lanes.run(1000, lambda: "done")

    assert run(go()) == "done"
    assert lanes.queued_chars == 0


def test_a_prompt_longer_than_the_context_can_hold_is_refused_before_tokenizing():
    engine = ScriptedEngine()  # a 64-token context
    config = ServerConfig(max_chars_per_token=3)  # at most 63 x 3 = 189 characters

    async def go():
        async with client(engine, config) as c:
            too_long = await c.post("/v1/completions", json={"prompt": "y" * 190})
            several = await c.post("/v1/completions", json={"prompt": ["ok", "y" * 190]})
            fits = await c.post("/v1/completions", json={"prompt": "y" * 20})
            return too_long, several, fits

    too_long, several, fits = run(go())
    assert too_long.status_code == 400
    error = too_long.json()["error"]
    assert error["param"] == "prompt"
    assert "prompt has 190 characters" in error["message"] and "189" in error["message"]
    assert "prompt[1] has 190 characters" in several.json()["error"]["message"]
    assert fits.status_code == 200
    assert all(len(text) <= 189 for text in engine.encoded)  # the long ones never encoded


def test_the_bound_is_the_context_less_one_token_times_the_characters_per_token():
    assert PromptBound(5).max_prompt_chars(100) == 99 * 5
    assert PromptBound(None).max_prompt_chars(100) is None


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> Tokenizer:
    path = write_tiny_checkpoint(tmp_path_factory.mktemp("checkpoint"))
    return Tokenizer.from_file(str(path / "tokenizer.json"))


def test_a_byte_level_bpe_bounds_characters_by_its_longest_vocabulary_string(tiny_tokenizer):
    bound = max_chars_per_token(tiny_tokenizer)
    longest = max(len(t) for t in tiny_tokenizer.get_vocab(with_added_tokens=True))
    assert bound == longest


def test_no_text_needs_more_characters_per_token_than_the_bound(tiny_tokenizer):
    bound = max_chars_per_token(tiny_tokenizer)
    vocab = tiny_tokenizer.get_vocab(with_added_tokens=False)
    spelled = [tiny_tokenizer.decode([i]) for i in sorted(vocab.values())]
    texts = [
        max(spelled, key=len) * 50,
        "é" * 300,
        "def main(argv=None):\n    return 0\n" * 20,
        "<|im_start|>" * 10,
        " " * 500,
    ]
    for text in texts:
        assert len(text) <= bound * len(tiny_tokenizer.encode(text).ids)


def test_tokenizers_that_may_drop_text_give_no_bound():
    whitespace = Tokenizer(models.BPE())
    whitespace.pre_tokenizer = pre_tokenizers.Whitespace()
    assert max_chars_per_token(whitespace) is None
    unknown = Tokenizer(models.BPE(unk_token="[UNK]"))
    unknown.add_special_tokens(["[UNK]"])
    assert max_chars_per_token(unknown) is None  # one unknown token may swallow a word


def test_a_composing_normalizer_multiplies_the_bound_by_four(tiny_tokenizer):
    composing = Tokenizer.from_str(tiny_tokenizer.to_str())
    composing.normalizer = normalizers.NFC()
    assert max_chars_per_token(composing) == 4 * max_chars_per_token(tiny_tokenizer)

"""Per-request output options the engine applies at publication (issue 15's API surface)."""

from __future__ import annotations

from ignition.runtime.requests.request import GenerationRequest, SamplingParams
from tests.runtime.scripted import EOS, Letters, expected_tokens, make_engine


def generate(prompt, **sampling):
    engine, _ = make_engine()
    chunks = []
    engine.submit(GenerationRequest("a", tuple(prompt), SamplingParams(**sampling)), chunks.append)
    engine.run_until_idle()
    return chunks


def text_of(chunks):
    return "".join(c.text for c in chunks)


def test_a_stop_token_id_ends_the_output_without_showing_it_and_is_the_stop_reason():
    tokens = expected_tokens([1, 2, 3], 6, stop_at_eos=False)
    stop = tokens[3]
    chunks = generate([1, 2, 3], max_tokens=6, ignore_eos=True, stop_token_ids=(stop,))
    assert text_of(chunks) == Letters().decode(tokens[:3])
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].stop_reason == stop
    assert chunks[-1].num_output_tokens == 4  # the stop token counts as generated


def test_include_stop_str_in_output_keeps_the_stop_string():
    full = Letters().decode(expected_tokens([1, 2, 3], 8, stop_at_eos=False))
    stop = full[3:5]
    kept = generate(
        [1, 2, 3], max_tokens=8, ignore_eos=True, stop=(stop,), include_stop_str_in_output=True
    )
    assert text_of(kept) == full[: full.index(stop)] + stop
    assert kept[-1].stop_reason == stop


def test_skip_special_tokens_false_shows_special_tokens():
    prompt = [4, 11]  # 11 -> 2 -> 17 -> 18 -> 25 (EOS, the special token "z") -> ...
    tokens = expected_tokens(prompt, 5, stop_at_eos=False)
    assert EOS in tokens
    hidden = generate(prompt, max_tokens=5, ignore_eos=True)
    shown = generate(prompt, max_tokens=5, ignore_eos=True, skip_special_tokens=False)
    assert text_of(hidden) == Letters().decode(tokens)
    assert text_of(shown) == Letters().decode(tokens, skip_special_tokens=False)
    assert "z" in text_of(shown) and "z" not in text_of(hidden)

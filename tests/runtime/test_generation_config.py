"""Issue 11, deliverable 6: generation_config.json supplies defaults for requests that omit them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from tokenizers import Tokenizer, models

from ignition.runtime.bundle import _eos_ids
from ignition.runtime.requests.generation_config import (
    GenerationConfigError,
    GenerationDefaults,
    load_generation_defaults,
)
from ignition.runtime.requests.request import SamplingParams

QWEN_LIKE = {
    "bos_token_id": 1,
    "do_sample": True,
    "eos_token_id": [7, 5],
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}


def folder_with(tmp_path: Path, config: dict) -> Path:
    (tmp_path / "generation_config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_file_states_temperature_top_p_top_k_and_end_of_sequence_ids(tmp_path):
    defaults = load_generation_defaults(folder_with(tmp_path, QWEN_LIKE))
    assert defaults == GenerationDefaults(0.6, 0.95, 20, (5, 7))


def test_a_request_that_omits_the_sampling_fields_gets_the_files_values():
    defaults = GenerationDefaults(0.6, 0.95, 20)
    sampling = defaults.apply(SamplingParams(max_tokens=4), given=set())
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.6, 0.95, 20)
    assert sampling.max_tokens == 4


def test_a_request_that_names_a_field_keeps_its_own_value():
    defaults = GenerationDefaults(0.6, 0.95, 20)
    given = SamplingParams(temperature=0.0, top_k=0)
    sampling = defaults.apply(given, given={"temperature", "top_k"})
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.0, 0.95, 0)


def test_repetition_penalty_and_min_p_from_the_file_are_defaults_too(tmp_path):
    """Issue 15: vLLM reads these two from generation_config.json as well."""
    config = {**QWEN_LIKE, "repetition_penalty": 1.05, "min_p": 0.1}
    defaults = load_generation_defaults(folder_with(tmp_path, config))
    sampling = defaults.apply(SamplingParams(repetition_penalty=1.2), {"repetition_penalty"})
    assert (sampling.repetition_penalty, sampling.min_p) == (1.2, 0.1)
    with pytest.raises(GenerationConfigError, match="repetition_penalty"):
        load_generation_defaults(folder_with(tmp_path, {"repetition_penalty": 0}))


def test_do_sample_false_makes_the_default_greedy(tmp_path):
    config = {"do_sample": False, "temperature": 0.7}
    assert load_generation_defaults(folder_with(tmp_path, config)).temperature == 0.0


def test_only_keys_present_in_the_file_become_defaults(tmp_path):
    defaults = load_generation_defaults(folder_with(tmp_path, {"temperature": 0.3}))
    sampling = defaults.apply(SamplingParams(), given=set())
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.3, 1.0, 0)


def test_without_the_file_there_are_no_defaults(tmp_path):
    assert load_generation_defaults(tmp_path) == GenerationDefaults()


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"temperature": "hot"}, "temperature = 'hot'"),
        ({"top_p": 1.5}, "top_p = 1.5"),
        ({"top_k": 2.5}, "top_k = 2.5"),
        ({"eos_token_id": ["x"]}, "eos_token_id = ['x']"),
        ({"do_sample": "yes"}, "do_sample = 'yes'"),
    ],
)
def test_a_bad_value_names_the_file_and_key(tmp_path, config, named):
    with pytest.raises(GenerationConfigError, match=r"generation_config\.json: ") as caught:
        load_generation_defaults(folder_with(tmp_path, config))
    assert named in str(caught.value)


def test_end_of_sequence_ids_from_the_file_join_the_bundles():
    model = SimpleNamespace(config=SimpleNamespace(eos_token_id=2))
    tokenizer = Tokenizer(models.WordLevel({"<unk>": 1, "<|im_end|>": 7}, unk_token="<unk>"))
    assert _eos_ids(tokenizer, {}, model, generation_eos=(5, 7)) == (2, 5, 7)

"""Issue 31: Qwen3.8-27B (dense, MTP) is published as a Qwen3.5-architecture checkpoint
(config.json ``model_type: qwen3_5``, ``Qwen3_5ForConditionalGeneration``), so its names
resolve to the ``qwen35`` recipe and its config is read by the ``qwen3_5`` family."""

from __future__ import annotations

import pytest

from ignition.model.families.registry import family_for_model_type
from ignition.recipes import get_recipe

# The text config as public reports of the release give it (64 layers, hidden 5120, FFN
# 17408, 24 query / 4 KV heads, GDN 16 key / 48 value heads of 128, full attention every
# 4th layer, rope theta 1e7 with interleaved mrope sections [11, 11, 10], one MTP layer).
QWEN38_27B_TEXT = {
    "model_type": "qwen3_5_text",
    "vocab_size": 248320,
    "hidden_size": 5120,
    "intermediate_size": 17408,
    "num_hidden_layers": 64,
    "full_attention_interval": 4,
    "num_attention_heads": 24,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 48,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 10000000,
        "partial_rotary_factor": 0.25,
        "mrope_section": [11, 11, 10],
        "mrope_interleaved": True,
    },
    "mtp_num_hidden_layers": 1,
    "dtype": "bfloat16",
}


@pytest.mark.parametrize("alias", ["qwen3.8-27b", "qwen3.8-27b-fp8"])
def test_qwen38_27b_names_resolve_to_the_qwen35_recipe(alias):
    assert get_recipe(alias).name == "qwen35"


def test_qwen38_27b_config_is_read_by_the_family_whose_recipe_is_qwen35():
    raw = {"model_type": "qwen3_5", "text_config": QWEN38_27B_TEXT}
    family = family_for_model_type(raw["model_type"], "config.json")
    config = family.parse_config(raw, "config.json", frozenset({"mtp.fc.weight"}))
    assert family.recipe == "qwen35"
    assert (config.num_hidden_layers, config.hidden_size, config.rotary_dim) == (64, 5120, 64)
    assert config.layer_types.count("qsa") == 16 and config.mtp_num_layers == 1

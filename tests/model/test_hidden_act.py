"""Issue 38, 3.10: config.json's ``hidden_act`` is honoured where transformers applies it (every
expert, the shared expert, dense MLPs and the GDN short convolution), checked against
transformers' own classes on tiny random checkpoints saved with a non-SiLU activation: prefill
logits at every position and token-by-token decode (the convolution's update path) within
1e-4 in fp32. An activation this runtime does not compute is refused in one line naming
config.json, the key and the value."""

from __future__ import annotations

import json

import pytest
import torch

from ignition.model.config import ConfigError
from ignition.model.weights import load_checkpoint
from tests.model.conftest import new_state
from tests.model.helpers import decode_rows
from tests.model.hf_checkpoints import (
    Variant,
    write_llama,
    write_qwen3_next,
    write_qwen4_exp,
    write_qwen35,
)
from tests.model.test_qwen35_parity import ATOL, CONTINUATION, PROMPT, reference_logits
from tests.model.test_qwen4_exp_parity import prompt_logits

pytest.importorskip("transformers")

WRITERS = {
    "qwen3_5-dense-gelu": lambda p: write_qwen35(
        p, Variant(hidden_act="gelu", mtp=False, multimodal=False)
    ),
    "qwen3_5_moe-gelu_pytorch_tanh": lambda p: write_qwen35(
        p, Variant(moe=True, hidden_act="gelu_pytorch_tanh", mtp=False, multimodal=False)
    ),
    "qwen3_next-relu": lambda p: write_qwen3_next(p, hidden_act="relu"),
    # output_gate_type sigmoid (the tiny config's): transformers requires it beside a gelu
    "qwen4_exp-gelu": lambda p: write_qwen4_exp(p, hidden_act="gelu"),
    "llama-gelu_new": lambda p: write_llama(p, hidden_act="gelu_new"),
}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def pair(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    reference = WRITERS[request.param](path)
    return load_checkpoint(path).model, reference, request.param.rsplit("-", 1)[1]


def test_the_config_reads_hidden_act(pair):
    model, reference, act = pair
    assert model.config.hidden_act == act == reference.config.get_text_config().hidden_act


def test_prefill_and_decode_logits_match_transformers(pair):
    model, reference, _ = pair
    state = new_state(model.config)
    expected = reference_logits(reference, PROMPT + CONTINUATION)
    ours = prompt_logits(model, state, 0, PROMPT)
    torch.testing.assert_close(ours, expected[: len(PROMPT)], atol=ATOL, rtol=0)
    for i, token in enumerate(CONTINUATION):
        out = decode_rows(model, state, [[token]], [0], width=1)
        torch.testing.assert_close(
            out.target.logits[0], expected[len(PROMPT) + i], atol=ATOL, rtol=0
        )


def _with_config(path, **changes) -> None:
    config = path / "config.json"
    raw = json.loads(config.read_text())
    text = raw.get("text_config", raw)
    text.update(changes)
    for key, value in changes.items():
        if value is None:
            text.pop(key)
    config.write_text(json.dumps(raw))


def test_an_activation_not_computed_here_is_refused_naming_file_key_and_value(tmp_path):
    write_qwen35(tmp_path, Variant(mtp=False, multimodal=False))
    _with_config(tmp_path, hidden_act="xielu")
    with pytest.raises(ConfigError) as err:
        load_checkpoint(tmp_path)
    message = str(err.value)
    assert str(tmp_path / "config.json") in message
    assert "'hidden_act' = 'xielu'" in message and "\n" not in message


def test_a_qwen4_exp_gelu_without_an_output_gate_type_is_refused_as_transformers_refuses(
    tmp_path,
):
    write_qwen4_exp(tmp_path)
    _with_config(tmp_path, hidden_act="gelu", output_gate_type=None)
    with pytest.raises(ConfigError, match=r"'hidden_act' = 'gelu': the GDN output gate"):
        load_checkpoint(tmp_path)

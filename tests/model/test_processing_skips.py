"""Issue 15: on CPU the logits processing skips the stages whose parameter is neutral for
every row (min_tokens 0, no penalty); the processed logits are the ones a GPU's program,
which runs every stage, computes."""

from __future__ import annotations

import pytest
import torch

from ignition.model import sampling
from ignition.model.logits_processing import SlotHistory
from ignition.model.sampling import SamplingTensors

ROWS, VOCAB = 4, 500


@pytest.mark.parametrize(
    "processing",
    [
        {},
        {"repetition_penalty": [1.0, 1.0, 1.0, 1.4], "min_tokens": [0, 0, 6, 0]},
        {"frequency_penalty": [0.0, 0.5, 0.0, 0.0], "presence_penalty": [0.2, 0.0, 0.0, 0.0]},
    ],
    ids=["neutral", "repetition-and-min-tokens", "frequency-and-presence"],
)
def test_skipping_neutral_stages_on_cpu_gives_the_logits_every_stage_gives(processing, monkeypatch):
    history = SlotHistory.allocate(ROWS, VOCAB, "cpu")
    history.output_counts[:, :40] = 2
    history.num_output[:] = 3
    history.prompt_mask[:, 30:90] = True
    history.bias[1, 7] = 4.0
    history.stop_mask[:, 2] = True
    logits = torch.randn(ROWS, VOCAB, generator=torch.Generator().manual_seed(4)) * 3
    params = SamplingTensors.build([0.8] * ROWS, **processing)
    rows = torch.arange(ROWS)
    extra = torch.zeros(ROWS, VOCAB, dtype=torch.int32)
    extra[:, 45] = 1
    offsets = torch.ones(ROWS, dtype=torch.int32)
    skipping = history.process(logits, rows, params, extra, offsets)
    monkeypatch.setattr(sampling, "SKIP_UNUSED_PATHS", False)
    assert torch.equal(skipping, history.process(logits, rows, params, extra, offsets))

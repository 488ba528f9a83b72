"""Issue 30: one-row bf16 projections on CPU go through ``torch.mv`` (model.row_products),
within bf16 rounding of ``nn.Linear``; every other case is ``nn.Linear`` bit for bit, and a
bf16 checkpoint loaded on CPU gets them with its tied weights still tied."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ignition.model.row_products import RowLinear, use_row_products
from ignition.model.weights import load_checkpoint
from tests.model.hf_checkpoints import Variant, write_qwen35


def pair(in_features: int, out_features: int, dtype: torch.dtype, bias: bool = False):
    torch.manual_seed(0)
    plain = nn.Linear(in_features, out_features, bias=bias).to(dtype)
    rows = nn.Linear(in_features, out_features, bias=bias).to(dtype)
    rows.load_state_dict(plain.state_dict())
    assert use_row_products(rows) == 1
    return plain, rows


class MvCalls:
    def __init__(self, monkeypatch) -> None:
        self.count = 0
        mv = torch.mv

        def counted(*args):
            self.count += 1
            return mv(*args)

        monkeypatch.setattr(torch, "mv", counted)


@pytest.mark.parametrize("shape", [(1, 512), (1, 1, 512), (512,)])
def test_one_bf16_row_goes_through_mv_within_rounding(shape, monkeypatch):
    plain, rows = pair(512, 2048, torch.bfloat16)
    x = torch.randn(shape, dtype=torch.bfloat16)
    calls = MvCalls(monkeypatch)
    with torch.no_grad():
        ours, expected = rows(x), plain(x)
    assert calls.count == 1 and ours.shape == expected.shape and ours.dtype == torch.bfloat16
    torch.testing.assert_close(ours.float(), expected.float(), atol=0.05, rtol=0.02)


@pytest.mark.parametrize(
    ("shape", "dtype", "bias"),
    [
        ((4, 512), torch.bfloat16, False),  # several rows
        ((0, 512), torch.bfloat16, False),  # no rows
        ((1, 512), torch.float32, False),  # fp32: linear is as fast
        ((1, 512), torch.bfloat16, True),  # a bias
    ],
)
def test_every_other_case_is_nn_linear_bit_for_bit(shape, dtype, bias, monkeypatch):
    plain, rows = pair(512, 256, dtype, bias)
    x = torch.randn(shape, dtype=dtype)
    calls = MvCalls(monkeypatch)
    with torch.no_grad():
        assert torch.equal(rows(x), plain(x))
    assert calls.count == 0


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_bf16_checkpoint_on_cpu_gets_row_products_with_ties_kept(tmp_path, dtype):
    pytest.importorskip("transformers")
    write_qwen35(tmp_path, Variant(dtype=dtype, tie_word_embeddings=True, mtp=False, seed=9))
    model = load_checkpoint(tmp_path).model
    kinds = {type(m) for m in model.modules() if isinstance(m, nn.Linear)}
    assert kinds == ({RowLinear} if dtype == "bfloat16" else {nn.Linear})
    assert model.lm_head.weight is model.embed_tokens.weight

"""The PLE row gather (docs/ple.md): the Triton kernel writes exactly the reference's rows,
padding ids write zeros and are never read, over odd shapes and the table's dtypes."""

from __future__ import annotations

import pytest
import torch

from ignition.kernels import use_backend
from ignition.kernels.row_gather.reference import gather_rows as reference_gather
from ignition.kernels.row_gather.triton import gather_rows as triton_gather

NO_ROW = torch.iinfo(torch.int64).max


def ids_with_padding(num_ids: int, num_rows: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, num_rows, (num_ids,), generator=gen)
    ids[::7] = NO_ROW
    ids[3::11] = -1
    return ids


@pytest.mark.parametrize("num_ids", [1, 63, 500])
@pytest.mark.parametrize("width", [1, 160, 300])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_kernel_gathers_the_reference_rows(device, num_ids, width, dtype):
    table = torch.randn(97, width).to(dtype).to(device)
    ids = ids_with_padding(num_ids, 97, seed=num_ids + width).to(device)
    out = torch.full((num_ids, width), float("nan"), dtype=dtype, device=device)
    expected = reference_gather(table, ids, torch.empty_like(out))
    assert torch.equal(triton_gather(table, ids, out), expected)


def test_padding_ids_write_zeros(device):
    table = torch.ones(5, 8, device=device)
    ids = torch.tensor([NO_ROW, -1, 5, 2], device=device)
    out = torch.full((4, 8), float("nan"), device=device)
    triton_gather(table, ids, out)
    assert out[:3].eq(0).all() and out[3].eq(1).all()


def test_fp8_rows_are_moved_as_stored(device):
    table = torch.randn(33, 160).to(torch.float8_e4m3fn).to(device)
    ids = ids_with_padding(40, 33, seed=5).to(device)
    out = torch.zeros(40, 160, dtype=torch.float8_e4m3fn, device=device)
    expected = reference_gather(table, ids, torch.empty_like(out))
    triton_gather(table, ids, out)
    assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))


def test_a_wrong_output_shape_is_one_line_naming_out(device):
    table = torch.zeros(4, 8, device=device)
    with pytest.raises(ValueError, match="gather_rows: out"):
        triton_gather(table, torch.zeros(3, dtype=torch.int64, device=device),
                      torch.zeros(3, 7, device=device))  # fmt: skip


def test_the_op_dispatches_to_the_kernel_when_asked(device):
    from ignition.kernels import ops

    table = torch.randn(10, 4, device=device)
    ids = torch.tensor([9, 0, NO_ROW], device=device)
    with use_backend("triton"):
        got = ops.gather_rows(table, ids, torch.empty(3, 4, device=device))
    assert torch.equal(got, reference_gather(table, ids, torch.empty(3, 4, device=device)))

from __future__ import annotations

import pytest
import torch

from ignition.kernels.gated_delta_rule import reference
from tests.kernels.kernel_gdn_cases import gdn_inputs, random_state, repeated_key_inputs
from tests.kernels.kernel_tolerances import GDN_OUTPUT, GDN_STATE, INTERPRETER_DTYPES, nan_like

pytestmark = pytest.mark.slow

NUM_HEADS, KEY_DIM, VALUE_DIM = 2, 16, 48  # Dv crosses a value block boundary
SCALE = KEY_DIM**-0.5


def on(device, *tensors):
    return [t.to(device) for t in tensors]


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize(
    ("num_tokens", "chunk_size"),
    [(1, 64), (63, 64), (63, 16), (100, 32)],
    ids=["single-token", "63", "63-in-chunks-of-16", "100-in-chunks-of-32"],
)
def test_chunked_rule_matches_reference(num_tokens, chunk_size, dtype, device):
    from ignition.kernels.gated_delta_rule import triton_chunk

    q, k, v, g, beta = on(
        device,
        *gdn_inputs((num_tokens,), num_heads=NUM_HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM,
                    dtype=dtype),
    )  # fmt: skip
    (state,) = on(device, random_state((), NUM_HEADS, KEY_DIM, VALUE_DIM))
    out, final = nan_like(v), nan_like(state)
    triton_chunk.launch_chunk_gated_delta_rule(
        q, k, v, g, beta, state, SCALE, out, final, chunk_size
    )
    expected_out, expected_final = reference.chunk_gated_delta_rule(
        q, k, v, g, beta, state, SCALE, chunk_size
    )
    torch.testing.assert_close(out, expected_out, **GDN_OUTPUT[dtype])
    torch.testing.assert_close(final, expected_final, **GDN_STATE)


def test_chunked_rule_with_padding_tokens_keeps_the_real_final_state(device):
    from ignition.kernels.gated_delta_rule import triton_chunk

    q, k, v, g, beta = on(device, *gdn_inputs((40,), key_dim=KEY_DIM, value_dim=VALUE_DIM))
    g[25:] = 0.0
    beta[25:] = 0.0
    (state,) = on(device, random_state((), NUM_HEADS, KEY_DIM, VALUE_DIM))
    _, padded_final = triton_chunk.chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, 16)
    _, real_final = reference.chunk_gated_delta_rule(
        q[:25], k[:25], v[:25], g[:25], beta[:25], state, SCALE, 16
    )
    torch.testing.assert_close(padded_final, real_final, **GDN_STATE)


@pytest.mark.parametrize("dtype", INTERPRETER_DTYPES, ids=str)
@pytest.mark.parametrize(("rows", "width"), [(1, 1), (4, 3), (3, 8)])
def test_recurrent_rule_matches_reference(rows, width, dtype, device):
    from ignition.kernels.gated_delta_rule import triton_recurrent

    q, k, v, g, beta = on(
        device,
        *gdn_inputs((rows, width), num_heads=NUM_HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM,
                    dtype=dtype),
    )  # fmt: skip
    (state,) = on(device, random_state((rows,), NUM_HEADS, KEY_DIM, VALUE_DIM))
    out = nan_like(v)
    states = nan_like(state, rows, width, NUM_HEADS, KEY_DIM, VALUE_DIM)
    triton_recurrent.launch_recurrent_gated_delta_rule(q, k, v, g, beta, state, SCALE, out, states)
    expected_out, expected_states = reference.recurrent_gated_delta_rule(
        q, k, v, g, beta, state, SCALE
    )
    torch.testing.assert_close(out, expected_out, **GDN_OUTPUT[dtype])
    torch.testing.assert_close(states, expected_states, **GDN_STATE)


def fused_views(leading: tuple[int, ...], device):
    """q, k, v as views into one [.., H * (2 Dk + Dv)] projection, g and beta into one [.., 2H]."""
    q, k, v, g, beta = gdn_inputs(
        leading, num_heads=NUM_HEADS, key_dim=KEY_DIM, value_dim=VALUE_DIM
    )
    fused = torch.cat([q.flatten(-2), k.flatten(-2), v.flatten(-2)], dim=-1).to(device)
    gates = torch.cat([g, beta], dim=-1).to(device)
    key_width = NUM_HEADS * KEY_DIM
    heads = (*leading, NUM_HEADS)
    return (
        fused[..., :key_width].unflatten(-1, (NUM_HEADS, KEY_DIM)),
        fused[..., key_width : 2 * key_width].unflatten(-1, (NUM_HEADS, KEY_DIM)),
        fused[..., 2 * key_width :].unflatten(-1, (NUM_HEADS, VALUE_DIM)),
        gates[..., :NUM_HEADS].expand(heads),
        gates[..., NUM_HEADS:].expand(heads),
    )


def test_chunked_rule_reads_strided_views_of_fused_projections(device):
    from ignition.kernels.gated_delta_rule import triton_chunk

    inputs = fused_views((37,), device)
    (state,) = on(device, random_state((), NUM_HEADS, KEY_DIM, VALUE_DIM))
    out, final = triton_chunk.chunk_gated_delta_rule(*inputs, state, SCALE, 16)
    expected_out, expected_final = reference.chunk_gated_delta_rule(*inputs, state, SCALE, 16)
    torch.testing.assert_close(out, expected_out, **GDN_OUTPUT[torch.float32])
    torch.testing.assert_close(final, expected_final, **GDN_STATE)


def test_recurrent_rule_reads_strided_views_of_fused_projections(device):
    from ignition.kernels.gated_delta_rule import triton_recurrent

    inputs = fused_views((3, 2), device)
    (state,) = on(device, random_state((3,), NUM_HEADS, KEY_DIM, VALUE_DIM))
    out, states = triton_recurrent.recurrent_gated_delta_rule(*inputs, state, SCALE)
    expected_out, expected_states = reference.recurrent_gated_delta_rule(*inputs, state, SCALE)
    torch.testing.assert_close(out, expected_out, **GDN_OUTPUT[torch.float32])
    torch.testing.assert_close(states, expected_states, **GDN_STATE)


def test_chunked_rule_stays_accurate_when_one_key_repeats(device):
    from ignition.kernels.gated_delta_rule import triton_chunk

    inputs = on(device, *repeated_key_inputs(64, key_dim=KEY_DIM, value_dim=VALUE_DIM))
    (state,) = on(device, random_state((), NUM_HEADS, KEY_DIM, VALUE_DIM))
    out, final = triton_chunk.chunk_gated_delta_rule(*inputs, state, SCALE, 64)
    expected_out, expected_final = reference.chunk_gated_delta_rule(*inputs, state, SCALE, 64)
    torch.testing.assert_close(out, expected_out, **GDN_OUTPUT[torch.float32])
    torch.testing.assert_close(final, expected_final, **GDN_STATE)

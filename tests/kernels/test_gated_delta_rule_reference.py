from __future__ import annotations

import pytest
import torch

from ignition.kernels.gated_delta_rule.reference import (
    chunk_gated_delta_rule,
    recurrent_gated_delta_rule,
)
from tests.kernels.kernel_gdn_cases import (
    gdn_inputs,
    naive_gated_delta_rule,
    random_state,
    repeated_key_inputs,
)

GDN_TOLERANCE = {"atol": 2e-5, "rtol": 2e-5}
SCALE = 16**-0.5


@pytest.mark.parametrize("num_tokens", [1, 15, 16, 63, 70])
def test_chunked_rule_matches_the_per_token_recurrence(num_tokens):
    q, k, v, g, beta = gdn_inputs((num_tokens,))
    state = random_state((), 2, 16, 32)
    out, final = chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, chunk_size=16)
    expected_out, expected_states = naive_gated_delta_rule(q, k, v, g, beta, state, SCALE)
    torch.testing.assert_close(out, expected_out, **GDN_TOLERANCE)
    torch.testing.assert_close(final, expected_states[-1], **GDN_TOLERANCE)


def test_chunked_rule_result_does_not_depend_on_chunk_size():
    q, k, v, g, beta = gdn_inputs((50,))
    state = random_state((), 2, 16, 32)
    small = chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, chunk_size=8)
    large = chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, chunk_size=64)
    torch.testing.assert_close(small, large, **GDN_TOLERANCE)


def test_chunked_rule_padding_tokens_leave_the_final_state_unchanged():
    q, k, v, g, beta = gdn_inputs((40,))
    state = random_state((), 2, 16, 32)
    _, real_final = chunk_gated_delta_rule(q[:29], k[:29], v[:29], g[:29], beta[:29], state, SCALE)
    g, beta = g.clone(), beta.clone()
    g[29:] = 0.0
    beta[29:] = 0.0
    out, padded_final = chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, chunk_size=16)
    torch.testing.assert_close(padded_final, real_final, **GDN_TOLERANCE)
    assert torch.isfinite(out).all()


def test_chunked_rule_does_not_modify_the_initial_state():
    q, k, v, g, beta = gdn_inputs((5,))
    state = random_state((), 2, 16, 32)
    before = state.clone()
    chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE)
    assert torch.equal(state, before)


def test_recurrent_rule_keeps_the_state_after_every_position():
    q, k, v, g, beta = gdn_inputs((3, 5))
    state = random_state((3,), 2, 16, 32)
    out, states = recurrent_gated_delta_rule(q, k, v, g, beta, state, SCALE)
    for r in range(3):
        expected_out, expected_states = naive_gated_delta_rule(
            q[r], k[r], v[r], g[r], beta[r], state[r], SCALE
        )
        torch.testing.assert_close(out[r], expected_out, **GDN_TOLERANCE)
        torch.testing.assert_close(states[r], expected_states, **GDN_TOLERANCE)


def test_recurrent_rule_padding_positions_repeat_the_last_state():
    q, k, v, g, beta = gdn_inputs((2, 4))
    g, beta = g.clone(), beta.clone()
    g[0, 2:] = 0.0
    beta[0, 2:] = 0.0
    _, states = recurrent_gated_delta_rule(q, k, v, g, beta, random_state((2,), 2, 16, 32), SCALE)
    torch.testing.assert_close(states[0, 3], states[0, 1], rtol=0, atol=0)
    torch.testing.assert_close(states[0, 2], states[0, 1], rtol=0, atol=0)


def test_chunked_rule_stays_accurate_when_one_key_repeats():
    q, k, v, g, beta = repeated_key_inputs(64)
    state = random_state((), 2, 16, 32)
    out, final = chunk_gated_delta_rule(q, k, v, g, beta, state, SCALE, chunk_size=64)
    expected_out, expected_states = naive_gated_delta_rule(q, k, v, g, beta, state, SCALE)
    torch.testing.assert_close(out, expected_out, **GDN_TOLERANCE)
    torch.testing.assert_close(final, expected_states[-1], **GDN_TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_rule_computes_what_transformers_reference_computes(dtype):
    """The chunked rule runs transformers' torch_chunk_gated_delta_rule op for op (one
    unitriangular solve against beta V and beta exp(G) K, in fp32 whatever the inputs'
    dtype), so prompt rows agree with it bitwise, not only within a tolerance."""
    qwen35 = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    q, k, v, g, beta = gdn_inputs((2, 150))  # [B, T, H, D]: three chunks, the last padded
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    state = random_state((2,), 2, 16, 32)
    expected_out, expected_final = qwen35.torch_chunk_gated_delta_rule(
        q, k, v, g, beta, initial_state=state, output_final_state=True
    )
    for row in range(2):
        out, final = chunk_gated_delta_rule(
            q[row], k[row], v[row], g[row], beta[row], state[row], 16**-0.5
        )
        assert out.dtype == dtype
        assert torch.equal(out, expected_out[row])
        assert torch.equal(final, expected_final[row])

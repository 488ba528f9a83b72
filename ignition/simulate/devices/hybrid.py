"""A roofline for the released model family: hybrid GDN / sparse-attention MoE with MTP,
the MoE Qwen3.8-Flash-Next and a dense sibling (``num_experts = 0``). The duration of
one execution, in ms, is docs/simulate.md's formula ("devices/hybrid.py"): matrix terms
at the physical capacities, state and cache terms at the active rows and their context."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ignition.simulate.devices.base import Execution

PLE_RESIDENCIES = ("host", "device", "none")


@dataclass(frozen=True)
class Accelerator:
    """One GPU: achievable HBM bandwidth (bytes/s) and dense FP8 rate (FLOP/s)."""

    name: str
    bandwidth: float
    flops: float
    bandwidth_fraction: float = 0.7
    flops_fraction: float = 0.55


# H200: the workplace's measured device-to-device copy (4.3 TB/s) and twice its measured
# bf16 rate (790 TFLOP/s) for FP8. H100 SXM: the same SMs and clocks, 3.35 / 4.8 of the
# H200's bandwidth.
H200 = Accelerator("H200", 4.3e12, 1.58e15)
H100 = Accelerator("H100-SXM", 4.3e12 * 3.35 / 4.8, 1.58e15)


@dataclass(frozen=True)
class HybridMoE:
    """Qwen3.8-Flash-Next-style model on ``gpus`` accelerators (tensor parallel)."""

    name: str
    gpu: Accelerator = H200
    gpus: int = 1
    # --- the model (qwen38-flash.md); bytes are FP8 weights unless said
    hidden: int = 2560
    moe_layers: int = 48
    qsa_layers: int = 12
    query_heads: int = 24
    head_dim: int = 256
    num_experts: int = 512
    routed_experts: int = 10
    expert_bytes: float = 3 * 2560 * 640  # gate, up and down of one routed expert
    dense_bytes: float = 3.0e9  # mixers, shared experts, hyper-connections, vocab head
    active_params: float = 6e9
    kv_bytes_per_token: float = 12 * 2 * 2 * 256  # FP8 K and V, 2 KV heads, 12 QSA layers
    index_bytes_per_token: float = 12 * 128 / 4  # one compressed index key per 4 tokens
    attention_budget: int = 2048  # QSA reads at most this many tokens per query
    gdn_state_bytes: float = 36 * 32 * 128 * 128 * 2  # bf16 recurrent state per row
    speculative_state_writes: bool = True  # a state write per verified position
    # --- PLE: the n-gram rows each target token gathers (``ple_delivery_ms``)
    ple_residency: str = "host"
    ple_bytes_per_token: float = 2 * 8 * 160  # bigram + trigram, 8 heads, 160 FP8 values
    ple_host_us_per_token: float = 0.0  # synchronous gather per decode / verify token
    ple_prefetch_us_per_token: float = 0.0  # host gather per prompt token, before its prefill
    # --- the MTP head: one full decoder layer plus the shared vocabulary head
    mtp_dense_bytes: float = 0.15e9
    lm_head_bytes: float = 248_320 * 2560
    draft_floor_ms: float = 0.5
    speculative_row_us: float = 0.0  # host bookkeeping per row per draft step (calibrated)
    # --- fixed costs
    floor_ms: float = 1.5  # launch, synchronisation, sampling, the engine's step
    all_reduce_us: float = 0.0  # latency of one TP all-reduce (0 on one GPU)
    link_bandwidth: float = 300e9  # NVLink bytes/s per GPU for all-reduce payloads

    def __post_init__(self) -> None:
        if self.ple_residency not in PLE_RESIDENCIES:
            raise ValueError(
                f"{self.name}: ple_residency {self.ple_residency!r} "
                f"(known: {', '.join(PLE_RESIDENCIES)})"
            )

    # --- the terms -------------------------------------------------------------------
    def experts_touched(self, n: int) -> float:
        """Distinct routed experts one layer reads for n tokens (uniform routing)."""
        if self.num_experts == 0:
            return 0.0
        return self.num_experts * (1 - math.exp(-self.routed_experts * n / self.num_experts))

    def attended(self, e: Execution) -> float:
        """Cached tokens the attention layers read: bounded by the budget per row."""
        if e.row_contexts:
            return float(sum(min(c, self.attention_budget) for c in e.row_contexts))
        return float(min(e.context, max(1, e.rows) * self.attention_budget))

    def _bandwidth(self) -> float:
        return self.gpus * self.gpu.bandwidth * self.gpu.bandwidth_fraction

    def _rate(self) -> float:
        return self.gpus * self.gpu.flops * self.gpu.flops_fraction

    def all_reduce_ms(self, n: float, count: int) -> float:
        """``count`` ring all-reduces of n tokens' hidden vectors (bf16) across the GPUs."""
        if self.gpus <= 1:
            return 0.0
        payload = 2 * (self.gpus - 1) / self.gpus * n * self.hidden * 2
        return count * (self.all_reduce_us * 1e-3 + payload / self.link_bandwidth * 1e3)

    def ple_delivery_ms(self, tokens: int, prompt_tokens: int = 0) -> float:
        """Delivering the PLE rows of ``tokens`` target tokens (``prompt_tokens`` of them
        prompt tokens) to the device. Host residency: a prompt's rows are gathered before its
        first chunk (``prompt_ready_ms``, not in the step), a decode or verification token's
        rows synchronously, once sampled or drafted (``ple_host_us_per_token``, calibrated);
        device residency reads the rows from HBM."""
        if self.ple_residency == "none":
            return 0.0
        if self.ple_residency == "device":
            return tokens * self.ple_bytes_per_token / self._bandwidth() * 1e3
        prompt = min(prompt_tokens, tokens)
        return (tokens - prompt) * self.ple_host_us_per_token * 1e-3

    def prompt_ready_ms(self, prompt_tokens: int) -> float:
        """Host time to gather a prompt's PLE rows before its first chunk can run (the
        engine's asynchronous prefetch: one FIFO on the host, beside the device)."""
        if self.ple_residency != "host":
            return 0.0
        return prompt_tokens * self.ple_prefetch_us_per_token * 1e-3

    def state_bytes(self, e: Execution) -> float:
        """GDN state read and written once per row; with ``speculative_state_writes``
        each verified position beyond the first also writes a state (rollback)."""
        drafting = e.rows if e.draft_rows < 0 else e.draft_rows
        extra = 0
        if self.speculative_state_writes and e.draft_steps > 0:
            extra = max(0, e.tokens - e.prompt_tokens - drafting)
        return self.gdn_state_bytes * (2 * e.rows + extra)

    def forward_ms(self, e: Execution) -> float:
        """The target forward: floor, roofline, all-reduces, PLE rows."""
        n = max(1, e.capacity_tokens)
        rows = max(1, e.rows)
        attended = self.attended(e)
        moved = (
            self.dense_bytes
            + self.moe_layers * self.experts_touched(n) * self.expert_bytes
            + attended * self.kv_bytes_per_token
            + e.context * self.index_bytes_per_token
            + self.state_bytes(e)
        )
        span = min(self.attention_budget, attended / rows + n / (2 * rows))
        work = 2 * self.active_params * n + 4 * self.qsa_layers * self.query_heads * (
            self.head_dim * n * span
        )
        roofline = max(moved / self._bandwidth(), work / self._rate()) * 1e3
        collectives = self.all_reduce_ms(n, 2 * self.moe_layers + 1)
        # padding rows are dummy tokens: only active tokens gather PLE rows
        ple = self.ple_delivery_ms(e.tokens, e.prompt_tokens)
        return self.floor_ms + roofline + collectives + ple

    def draft_step_ms(self, rows: int, context_per_row: float = 0.0) -> float:
        """One MTP proposal for ``rows`` rows: a full decoder layer (its experts touched
        grow with the rows) and the vocabulary head."""
        r = max(1, rows)
        moved = (
            self.mtp_dense_bytes
            + self.lm_head_bytes
            + self.experts_touched(r) * self.expert_bytes
            + r
            * min(context_per_row, self.attention_budget)
            * self.kv_bytes_per_token
            / max(1, self.qsa_layers)
        )
        work = 2 * (self.active_params / self.moe_layers) * r + 2 * self.lm_head_bytes * r
        roofline = max(moved / self._bandwidth(), work / self._rate()) * 1e3
        bookkeeping = r * self.speculative_row_us * 1e-3
        return self.draft_floor_ms + roofline + self.all_reduce_ms(r, 3) + bookkeeping

    def duration_ms(self, e: Execution) -> float:
        total = self.forward_ms(e)
        if e.draft_steps > 0:
            rows = e.rows if e.draft_rows < 0 else e.draft_rows
            per_row = e.context / max(1, e.rows)
            total += e.draft_steps * self.draft_step_ms(rows, per_row)
        return total

"""``--metrics-names vllm``: ``vllm:*`` aliases beside the ``flare_*`` metrics, for
dashboards and autoscalers written for vLLM (docs/server.md, "Metrics: vLLM names").
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

# flare family name -> vLLM family names (a family's samples add _total, _bucket, ...).
VLLM_ALIASES: dict[str, tuple[str, ...]] = {
    "flare_requests_running": ("vllm:num_requests_running",),
    "flare_requests_waiting": ("vllm:num_requests_waiting",),
    "flare_requests_swapped": ("vllm:num_requests_swapped",),
    "flare_kv_cache_usage_perc": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "flare_num_preemptions": ("vllm:num_preemptions",),
    "flare_prompt_tokens": ("vllm:prompt_tokens",),
    "flare_generation_tokens": ("vllm:generation_tokens",),
    "flare_requests": ("vllm:request_success",),
    "flare_time_to_first_token_seconds": ("vllm:time_to_first_token_seconds",),
    "flare_inter_token_seconds": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    ),
    "flare_e2e_request_latency_seconds": ("vllm:e2e_request_latency_seconds",),
    "flare_request_queue_time_seconds": ("vllm:request_queue_time_seconds",),
    "flare_request_prefill_time_seconds": ("vllm:request_prefill_time_seconds",),
    "flare_request_decode_time_seconds": ("vllm:request_decode_time_seconds",),
    "flare_speculative_drafts": ("vllm:spec_decode_num_drafts",),
    "flare_speculative_draft_tokens": ("vllm:spec_decode_num_draft_tokens",),
    "flare_speculative_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens",),
    "flare_speculative_accepted_tokens_per_position": (
        "vllm:spec_decode_num_accepted_tokens_per_pos",
    ),
    **{
        f"flare_ple_{name}": (f"vllm:ple_{name}",)
        for name in (
            "table_bytes",
            "rows_gathered",
            "bytes_moved",
            "cache_hits",
            "cache_misses",
            "cache_hit_rate",
            "exposed_delivery_nanoseconds",
            "delivered_frames",
        )
    },
}
# Labels vLLM spells differently, per vLLM family.
RENAMED_LABELS = {"vllm:request_success": {"finish_reason": "finished_reason"}}


def renamed(metric: Metric, name: str) -> Metric:
    """``metric`` under ``name``: every sample's family prefix and vLLM's label names."""
    copy = Metric(name, metric.documentation, metric.type, metric.unit)
    labels = RENAMED_LABELS.get(name, {})
    for sample in metric.samples:
        copy.add_sample(
            name + sample.name[len(metric.name) :],
            {labels.get(k, k): v for k, v in sample.labels.items()},
            sample.value,
            sample.timestamp,
            sample.exemplar,
        )
    return copy


class WithVllmAliases(Collector):
    """Everything ``registry`` collects, then the vLLM copies of the aliased families."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        aliases = []
        for metric in self._registry.collect():
            yield metric
            aliases.extend(renamed(metric, n) for n in VLLM_ALIASES.get(metric.name, ()))
        yield from aliases

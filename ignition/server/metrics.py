"""Prometheus exposition for ``/metrics``.

Engine counters (graph executions, speculative drafts) live in the runtime as
plain numbers (:class:`ignition.runtime.stats.EngineStats`) so that the runtime
does not depend on prometheus-client; a custom collector reads them at scrape
time. Latency histograms are observed here, where publication reaches the
client. Names keep the ``flare_`` prefix of the dashboards they feed.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ignition.helios import ExecutionClass
from ignition.runtime.stats import EngineStats

LATENCY_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class _EngineCollector(Collector):
    def __init__(self, stats: EngineStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        s = self._stats.snapshot()
        executions = CounterMetricFamily(
            "flare_scheduler_executions",
            "Graph executions completed, by graph kind and execution class "
            "(ordinary, discovery, timing_refresh, acceptance_learning)",
            labels=["kind", "class"],
        )
        nanoseconds = CounterMetricFamily(
            "flare_scheduler_execution_nanoseconds",
            "Measured execution interval of completed graphs, by graph kind and execution class",
            labels=["kind", "class"],
        )
        # every class of every kind seen, zeros included, so each series exists from the
        # first execution of its kind on
        for kind in sorted(s.executions_by_kind):
            for cls in ExecutionClass:
                key = (kind, cls.value)
                executions.add_metric(list(key), s.executions_by_kind_class.get(key, 0))
                nanoseconds.add_metric(list(key), s.execution_ns_by_kind_class.get(key, 0))
        yield executions
        yield nanoseconds
        yield CounterMetricFamily(
            "flare_speculative_drafts",
            "Complete speculative rounds with proposals",
            value=s.speculative_rounds,
        )
        yield CounterMetricFamily(
            "flare_speculative_draft_tokens",
            "Draft tokens offered for verification",
            value=s.speculative_draft_tokens,
        )
        yield CounterMetricFamily(
            "flare_speculative_accepted_tokens",
            "Accepted draft tokens",
            value=s.speculative_accepted_tokens,
        )
        per_position = CounterMetricFamily(
            "flare_speculative_accepted_tokens_per_position",
            "Accepted draft tokens by draft position (1-based)",
            labels=["position"],
        )
        for position, count in sorted(s.accepted_by_position.items()):
            per_position.add_metric([str(position)], count)
        yield per_position
        requests = CounterMetricFamily(
            "flare_requests",
            "Finished requests by finish reason",
            labels=["finish_reason"],
        )
        for reason, count in sorted(s.finished_by_reason.items()):
            requests.add_metric([reason], count)
        yield requests
        yield CounterMetricFamily(
            "flare_prompt_tokens", "Prompt tokens consumed", value=s.prompt_tokens
        )
        yield CounterMetricFamily(
            "flare_generation_tokens", "Output tokens committed", value=s.output_tokens
        )
        yield GaugeMetricFamily(
            "flare_requests_running", "Requests admitted and not finished", value=s.running
        )
        yield GaugeMetricFamily(
            "flare_requests_waiting", "Requests waiting for a slot", value=s.waiting
        )


class ServerMetrics:
    """One registry per app, so several servers (or tests) never share counters."""

    def __init__(self, stats: EngineStats) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(stats))
        self.http_requests = Counter(
            "flare_http_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.time_to_first_token = Histogram(
            "flare_time_to_first_token_seconds",
            "Arrival to first published text",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.inter_token = Histogram(
            "flare_inter_token_seconds",
            "Gap between consecutive published bursts",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

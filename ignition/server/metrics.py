"""Prometheus exposition for ``/metrics``: a collector reads the runtime's plain counters
at scrape time, so the runtime never imports prometheus-client; latency histograms are
observed here, where publication reaches the client (docs/server.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ignition.helios import ExecutionClass
from ignition.runtime.loop.stats import (
    LEARNED_SOURCE,
    PHASE_BUCKETS_S,
    EngineStats,
    PhaseHistogram,
    SourceCounts,
    StatsSnapshot,
)
from ignition.runtime.ple.stats import PleSnapshot
from ignition.server.vllm_metrics import WithVllmAliases

PHASE_HELP = {
    "queue": "Arrival to admission (waiting for a request slot)",
    "prefill": "Admission to the first output token (prompt processing)",
    "decode": "First output token to the end of the request",
}

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
    60.0,
    120.0,
)


class _EngineCollector(Collector):
    def __init__(self, stats: EngineStats, model_name: str) -> None:
        self._stats = stats
        self._model = model_name

    def _counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=["model_name"])
        family.add_metric([self._model], value)
        return family

    def _gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=["model_name"])
        family.add_metric([self._model], value)
        return family

    def _histogram(self, name: str, doc: str, h: PhaseHistogram) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=["model_name"])
        cumulative, buckets = 0, []
        for bound, count in zip((*PHASE_BUCKETS_S, float("inf")), h.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else str(bound), cumulative))
        family.add_metric([self._model], buckets, sum_value=h.total_s)
        return family

    def _speculative(self, s: StatsSnapshot) -> Iterator[CounterMetricFamily]:
        """The speculative counters by proposal source ("mtp", "ngram", "grammar"), the
        learned source's series from the start; summed over ``source``, the totals."""
        m = self._model
        by_source = {LEARNED_SOURCE: SourceCounts(), **s.speculative_by_source}
        families = [
            CounterMetricFamily(name, doc, labels=["model_name", "source"])
            for name, doc in (
                ("flare_speculative_drafts", "Complete speculative rounds with proposals"),
                ("flare_speculative_draft_tokens", "Draft tokens offered for verification"),
                ("flare_speculative_accepted_tokens", "Accepted draft tokens"),
            )
        ]
        for source, c in sorted(by_source.items()):
            for family, value in zip(
                families, (c.rounds, c.draft_tokens, c.accepted_tokens), strict=True
            ):
                family.add_metric([m, source], value)
        yield from families
        per_position = CounterMetricFamily(
            "flare_speculative_accepted_tokens_per_position",
            "Accepted draft tokens by draft position (1-based)",
            labels=["model_name", "source", "position"],
        )
        for (source, position), count in sorted(s.accepted_by_source_position.items()):
            per_position.add_metric([m, source, str(position)], count)
        yield per_position

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        s = self._stats.snapshot()
        m = self._model
        executions = CounterMetricFamily(
            "flare_scheduler_executions",
            "Graph executions completed, by graph kind and execution class "
            "(ordinary, discovery, timing_refresh, acceptance_learning)",
            labels=["model_name", "kind", "class"],
        )
        nanoseconds = CounterMetricFamily(
            "flare_scheduler_execution_nanoseconds",
            "Measured execution interval of completed graphs, by graph kind and execution class",
            labels=["model_name", "kind", "class"],
        )
        # every class of every kind seen, zeros included, so each series exists from the
        # first execution of its kind on
        for kind in sorted(s.executions_by_kind):
            for cls in ExecutionClass:
                key = (kind, cls.value)
                executions.add_metric([m, *key], s.executions_by_kind_class.get(key, 0))
                nanoseconds.add_metric([m, *key], s.execution_ns_by_kind_class.get(key, 0))
        yield executions
        yield nanoseconds
        yield from self._speculative(s)
        requests = CounterMetricFamily(
            "flare_requests",
            "Finished requests by finish reason",
            labels=["model_name", "finish_reason"],
        )
        for reason, count in sorted(s.finished_by_reason.items()):
            requests.add_metric([m, reason], count)
        yield requests
        yield self._counter("flare_prompt_tokens", "Prompt tokens consumed", s.prompt_tokens)
        yield self._counter("flare_generation_tokens", "Output tokens committed", s.output_tokens)
        yield self._gauge("flare_requests_running", "Requests admitted and not finished", s.running)
        yield self._gauge("flare_requests_waiting", "Requests waiting for a slot", s.waiting)
        yield self._gauge(
            "flare_requests_swapped",
            "Requests preempted (state in a snapshot row or to recompute), not yet resumed",
            s.preempted,
        )
        yield self._counter(
            "flare_num_preemptions", "Requests preempted when KV pages ran out", s.preemptions
        )
        yield self._gauge(
            "flare_request_slots_used", "Request slots (GDN state rows) held", s.slots_used
        )
        # Prefix caching of hybrid state: retained complete-state checkpoints.
        for name, help_text, value in (
            (
                "flare_prefix_cache_queries",
                "Admissions matched against retained checkpoints",
                s.prefix_cache_queries,
            ),
            (
                "flare_prefix_cache_hits",
                "Admissions that restored a retained checkpoint",
                s.prefix_cache_hits,
            ),
            (
                "flare_prefix_cache_restored_tokens",
                "Prompt tokens restored instead of prefilled",
                s.prefix_cache_restored_tokens,
            ),
            (
                "flare_prefix_cache_evictions",
                "Retained checkpoints evicted for a new capture",
                s.prefix_cache_evictions,
            ),
            (
                "flare_prefix_cache_unprofitable_restores",
                "Matched checkpoints not restored: the saved prefill would not pay for the copy",
                s.prefix_cache_unprofitable_restores,
            ),
            (
                "flare_prefix_cache_unprofitable_captures",
                "Captures not taken: restoring them for the predicted next turn would not pay",
                s.prefix_cache_unprofitable_captures,
            ),
        ):
            yield self._counter(name, help_text, value)
        yield self._gauge("flare_request_slots", "Request slots (GDN state rows)", s.num_slots)
        yield self._gauge("flare_kv_pages_used", "KV cache pages held by requests", s.pages_used)
        yield self._gauge("flare_kv_pages", "KV cache pages requests may hold", s.num_pages)
        yield self._gauge(
            "flare_kv_cache_usage_perc",
            "Fraction of KV cache pages in use (0..1)",
            s.pages_used / s.num_pages if s.num_pages else 0.0,
        )
        for phase, histogram in sorted(s.phases.items()):
            yield self._histogram(
                f"flare_request_{phase}_time_seconds", PHASE_HELP[phase], histogram
            )
        yield self._gauge(
            "flare_state_rows_usage_perc",
            "Fraction of GDN state rows (request slots) in use (0..1)",
            s.slots_used / s.num_slots if s.num_slots else 0.0,
        )


class _PleCollector(Collector):
    """The PLE n-gram table's delivery (docs/ple.md), labelled by residency; a model
    without a table reports residency "none" and zeros."""

    def __init__(self, stats: EngineStats, model_name: str) -> None:
        self._stats = stats
        self._model = model_name

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        ple = getattr(self._stats, "ple", None)
        s = ple.snapshot() if ple is not None else PleSnapshot("none", 0)
        labels = [self._model, s.residency]
        table = GaugeMetricFamily(
            "flare_ple_table_bytes",
            "Bytes of the PLE n-gram table, by residency (none: no PLE table)",
            labels=["model_name", "residency"],
        )
        table.add_metric(labels, s.table_bytes)
        yield table
        for name, doc, value in (
            ("flare_ple_rows_gathered", "PLE table rows gathered for frames", s.rows_gathered),
            (
                "flare_ple_bytes_moved",
                "Bytes read from the table's memory (disk: cache misses only)",
                s.bytes_moved,
            ),
            ("flare_ple_cache_hits", "PLE rows served by the disk row cache", s.cache_hits),
            ("flare_ple_cache_misses", "PLE rows read from the mapped shards", s.cache_misses),
            (
                "flare_ple_exposed_delivery_nanoseconds",
                "Exposed PLE delivery delay summed over frames (subtracted from cost samples)",
                s.exposed_ns,
            ),
            (
                "flare_ple_delivered_frames",
                "Frames whose PLE rows went through the mailbox",
                s.frames,
            ),
        ):
            family = CounterMetricFamily(name, doc, labels=["model_name", "residency"])
            family.add_metric(labels, value)
            yield family
        lookups = s.cache_hits + s.cache_misses
        rate = GaugeMetricFamily(
            "flare_ple_cache_hit_rate",
            "Fraction of disk-residency row lookups served by the cache (0..1)",
            labels=["model_name", "residency"],
        )
        rate.add_metric(labels, s.cache_hits / lookups if lookups else 0.0)
        yield rate


class ServerMetrics:
    """One registry per app, so several servers (or tests) never share counters."""

    def __init__(
        self, stats: EngineStats, model_name: str = "ignition", vllm_aliases: bool = False
    ) -> None:
        self.model_name = model_name
        self.registry = CollectorRegistry()
        # What /metrics renders: the flare registry, and with ``vllm_aliases`` its vllm:*
        # copies too (server/vllm_metrics.py).
        self.exposed = self.registry
        if vllm_aliases:
            self.exposed = CollectorRegistry()
            self.exposed.register(WithVllmAliases(self.registry))
        self.registry.register(_EngineCollector(stats, model_name))
        self.registry.register(_PleCollector(stats, model_name))
        self.http_requests = Counter(
            "flare_http_requests",
            "HTTP requests by endpoint and status",
            ["model_name", "endpoint", "status"],
            registry=self.registry,
        )

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(
                name, doc, ["model_name"], buckets=LATENCY_BUCKETS_S, registry=self.registry
            ).labels(model_name)

        self.time_to_first_token = histogram(
            "flare_time_to_first_token_seconds", "Arrival to first published text"
        )
        self.inter_token = histogram(
            "flare_inter_token_seconds", "Gap between consecutive published bursts"
        )
        self.e2e_latency = histogram(
            "flare_e2e_request_latency_seconds", "Arrival to the final chunk of a choice"
        )

    def count(self, endpoint: str, status: int) -> None:
        self.http_requests.labels(self.model_name, endpoint, str(status)).inc()

    def observe_finished(self, seconds: float) -> None:
        self.e2e_latency.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.exposed)

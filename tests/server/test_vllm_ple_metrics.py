"""``--metrics-names vllm`` names the PLE delivery and stall series too (issue 38, item 4):
``vllm:ple_*`` beside each ``flare_ple_*`` series, with the same labels and values."""

from __future__ import annotations

import re

from ignition.runtime.ple.stats import PleStats
from ignition.server.config import ServerConfig
from tests.server.scripted import ScriptedEngine, client, run

PLE_SERIES = (
    "ple_table_bytes",
    "ple_rows_gathered_total",
    "ple_bytes_moved_total",
    "ple_cache_hits_total",
    "ple_cache_misses_total",
    "ple_cache_hit_rate",
    "ple_exposed_delivery_nanoseconds_total",
    "ple_delivered_frames_total",
)


def scrape(vllm_metrics: bool) -> str:
    engine = ScriptedEngine()
    engine.stats.ple = PleStats("disk", 4096)
    engine.stats.ple.add_gather(rows=12, nbytes=768, hits=9, misses=3)
    engine.stats.ple.add_frame(exposed_ns=2500)

    async def go():
        async with client(engine, ServerConfig(vllm_metrics=vllm_metrics)) as c:
            return (await c.get("/metrics")).text

    return run(go())


def samples(text: str, prefix: str) -> dict[str, str]:
    """Each PLE sample under ``prefix``: its name without the prefix and labels -> value."""
    pattern = rf"^{re.escape(prefix)}(ple_\w+)(\{{[^}}]*\}}) (\S+)$"
    return {name + labels: value for name, labels, value in re.findall(pattern, text, re.M)}


def test_each_ple_series_has_a_vllm_alias_with_its_labels_and_value():
    text = scrape(vllm_metrics=True)
    flare, vllm = samples(text, "flare_"), samples(text, "vllm:")
    assert {key.split("{")[0] for key in flare} == set(PLE_SERIES)
    assert vllm == flare
    label = '{model_name="scripted",residency="disk"}'
    assert vllm["ple_exposed_delivery_nanoseconds_total" + label] == "2500.0"
    assert vllm["ple_cache_hit_rate" + label] == "0.75"


def test_without_the_option_the_ple_series_keep_their_flare_names_only():
    text = scrape(vllm_metrics=False)
    assert samples(text, "flare_") and not samples(text, "vllm:")

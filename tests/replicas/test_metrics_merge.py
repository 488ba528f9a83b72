"""The router's /metrics: replicas' expositions merged by family, labelled ``replica``."""

from __future__ import annotations

from ignition.replicas.metrics import labelled, merge

A = """# HELP flare_requests_running Requests admitted
# TYPE flare_requests_running gauge
flare_requests_running{model_name="m"} 1.0
# HELP vllm:num_requests_waiting Waiting
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 0.0
# HELP lat Latency
# TYPE lat histogram
lat_bucket{le="1.0"} 2.0
lat_count 2.0
"""


def test_every_sample_gains_the_replica_label():
    assert labelled('x{a="b"} 1', "replica", "r") == 'x{replica="r",a="b"} 1'
    assert labelled("x 1", "replica", "r") == 'x{replica="r"} 1'
    assert labelled("x{} 1", "replica", "r") == 'x{replica="r"} 1'


def test_families_stay_together_under_one_help_and_type():
    text = merge({"replica-0": A, "replica-1": A.replace("1.0", "3.0")})
    lines = text.splitlines()
    assert lines.count("# TYPE flare_requests_running gauge") == 1
    start = lines.index("# TYPE flare_requests_running gauge")
    assert lines[start + 1 : start + 3] == [
        'flare_requests_running{replica="replica-0",model_name="m"} 1.0',
        'flare_requests_running{replica="replica-1",model_name="m"} 3.0',
    ]
    assert 'vllm:num_requests_waiting{replica="replica-1",model_name="m"} 0.0' in lines
    hist = lines.index("# TYPE lat histogram")
    assert lines[hist + 1 : hist + 5] == [
        'lat_bucket{replica="replica-0",le="1.0"} 2.0',
        'lat_count{replica="replica-0"} 2.0',
        'lat_bucket{replica="replica-1",le="3.0"} 2.0',
        'lat_count{replica="replica-1"} 2.0',
    ]

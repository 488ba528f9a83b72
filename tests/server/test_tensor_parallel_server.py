"""Issue 17: `ignition serve --tensor-parallel-size 2` (two gloo ranks on CPU) serves, and a
rank other than zero that raises while staging or waiting fails only its frame's request:
the server reports the error naming the rank, innocent requests finish whole, and the group
keeps serving (the ranks agree on every frame before it runs, and report every wait). A rank
that fails inside an agreed program stops the group: the server ends the request and exits
non-zero instead of hanging.

Budget: one small build and two server starts (two ranks load and warm up the bundle), then
a few short streams: about 35 s on the 2-core CI machine. Fault injection: the test-only rank
fault plan, ignition/distributed/faults.py.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from click.testing import CliRunner

from ignition.cli import main
from tests.server.conftest import server_process
from tests.server.test_reliability import finish_of, stream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LAUNCH, WAIT, RUN = 601, 602, 603
FAULTS = f"1:launch:{LAUNCH},1:wait:{WAIT}"


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("tp-serve-bundle")
    args = ["build", "--out", str(out), "--max-prefill-chunk", "64", "--concurrency", "2"]
    args += ["--num-draft-tokens", "2"]
    result = CliRunner().invoke(main, [*args, "--device", "cpu", "--mixed-prefill"])
    assert result.exit_code == 0, result.output
    return out


def error_of(result: dict) -> str:
    return " ".join(str(e["error"]) for e in result["events"] if "error" in e)


def test_a_rank_that_raises_fails_its_request_the_server_reports_it_and_keeps_serving(
    small_bundle,
):
    env = {"IGNITION_TEST_RANK_FAULT": FAULTS}
    args = ("--tensor-parallel-size", "2", "--tensor-parallel-debug", "--device", "cpu")
    with server_process(small_bundle, "serve", *args, env=env) as (url, process, _log):
        with ThreadPoolExecutor(2) as pool:
            innocent = pool.submit(stream, url, [10, 11, 12], 16)
            time.sleep(0.3)
            targeted = stream(url, [LAUNCH, 11, 12], 16)
            assert finish_of(targeted) == "error"
            assert "rank 1 could not stage" in error_of(targeted)
            result = innocent.result()
            assert finish_of(result) == "length", error_of(result)
            assert result["events"][-1]["usage"]["completion_tokens"] == 16
        targeted = stream(url, [WAIT, 11, 12], 16)
        assert finish_of(targeted) == "error"
        assert "rank 1 failed: InjectedFault" in error_of(targeted)
        assert httpx.get(f"{url}/health").status_code == 200
        assert finish_of(stream(url, [20, 21], 5)) == "length"
        assert process.poll() is None


def test_a_rank_that_fails_inside_a_program_stops_the_group_and_the_server_exits_non_zero(
    small_bundle,
):
    env = {"IGNITION_TEST_RANK_FAULT": f"1:run:{RUN}"}
    args = ("--tensor-parallel-size", "2", "--device", "cpu")
    with server_process(small_bundle, "serve", *args, env=env) as (url, process, log):
        result = stream(url, [RUN, 11, 12], 16)
        assert finish_of(result) == "error"
        assert "collectives are out of step" in error_of(result)
        assert process.wait(timeout=120) == 1
    text = log.read_text()
    assert "rank 1: injected run fault" in text and "exiting" in text

"""``scripts/scheduling_sim/host_chain``: a random-token run's end decomposed into the
host's prompt-row chain and the tail."""

from __future__ import annotations

import pytest

from scripts.scheduling_sim import host_chain


def test_the_terms_add_up_to_the_end():
    for policy in ("helios", "vllm-padded"):
        ch = host_chain.run_chain(policy, 8, 0)
        total = ch.first_start_ms + ch.gathers_ms + ch.host_idle_ms + ch.tail_ms
        assert total == pytest.approx(ch.end_ms, abs=1e-3)
        assert ch.gathers_ms == pytest.approx(40 * 1024 * 0.16, rel=0.01)  # 40 prompts
        assert ch.host_idle_ms > 0 and 0.9 < ch.device_busy <= 1.0
        assert ch.prompts_per_frame == pytest.approx(1.0)


def test_the_table_has_a_row_per_policy_with_every_column():
    names = ["helios", "vllm-padded"]
    chains = host_chain.run_chains(names, 8, [0, 1])
    lines = host_chain.table(names, 8, [0, 1], chains)
    assert "seeds 0, 1." in lines[0]
    assert host_chain.seed_text([0, 1, 2, 3]) == "0-3"
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[4:6]]
    assert [r[0] for r in rows] == ["`helios`", "`vllm-padded`"]
    assert all(len(r) == 1 + len(host_chain.COLUMNS) for r in rows)
    assert all(float(r[-1]) == 1.0 for r in rows)  # one prompt per prompt frame at c = 8
    histogram = host_chain.wait_histogram("helios", chains[0])
    counts = [int(cell.split(": ")[1]) for cell in histogram.split("|")[2].split(", ")]
    assert sum(counts) == len(chains[0].waits_ms) == 40  # every prompt in one bin


def test_a_bad_concurrency_is_one_line(capsys):
    with pytest.raises(SystemExit):
        host_chain.main(["helios", "-c", "0"])
    assert "--concurrency 0: must be >= 1" in capsys.readouterr().err


def test_the_paired_differences_are_each_seeds_difference_averaged():
    a = host_chain.run_chain("helios", 8, 0), host_chain.run_chain("helios", 8, 1)
    b = host_chain.run_chain("vllm-k1-padded", 8, 0), host_chain.run_chain("vllm-k1-padded", 8, 1)
    lines = host_chain.paired(["helios", "vllm-k1-padded"], [*a, *b], 2)
    cells = [c.strip() for c in lines[-1].split("|")[1:-1]]
    idle = sum(y.host_idle_ms - x.host_idle_ms for x, y in zip(a, b)) / 2
    assert cells[0] == "`vllm-k1-padded`" and cells[1].startswith(f"{idle:+.0f} +- ")

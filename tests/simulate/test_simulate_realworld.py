"""The real-world study's one command: bad input in one line, its page sections, plots."""

from __future__ import annotations

import pytest

from ignition.simulate.workloads import WorkloadError
from scripts.scheduling_sim import realworld
from scripts.scheduling_sim.realworld import (
    Plan,
    SeedMean,
    long_prompt_workload,
    main,
    replace_section,
    verdicts,
)
from scripts.scheduling_sim.svg import bar_chart


def test_an_unknown_profile_fails_in_one_line_naming_it(capsys):
    assert main(["--quick", "--profiles", "qwen38-flash-next-a100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown device profile 'qwen38-flash-next-a100'")
    assert "\n" not in err


def test_a_negative_long_prompt_rate_is_one_line_naming_it():
    with pytest.raises(WorkloadError, match="long-prompt load = -1"):
        long_prompt_workload(Plan(quick=True), -1.0)


def test_long_prompts_arrive_while_the_decoders_run():
    requests = long_prompt_workload(Plan(quick=True, long_decoders=30, long_prompts=5), 0.5)
    decoders = [r for r in requests if r.output_tokens == 4000]  # the full study's
    prompts = [r for r in requests if r.prompt_tokens >= 2000]
    assert len(decoders) == 30 and len(prompts) == 5
    assert min(p.arrival_ms for p in prompts) > max(d.arrival_ms for d in decoders)


def test_a_section_is_replaced_between_its_markers_and_inserted_when_absent():
    page = "# T\n\nold\n<!-- x:begin -->\nA\n<!-- x:end -->\ntail\n"
    assert replace_section(page, "x", "<!-- x:begin -->\nB\n<!-- x:end -->") == (
        "# T\n\nold\n<!-- x:begin -->\nB\n<!-- x:end -->\ntail\n"
    )
    assert "<!-- y:begin -->" in replace_section(page, "y", "<!-- y:begin -->\n<!-- y:end -->")


def test_a_bar_chart_is_an_svg_with_one_bar_per_policy(tmp_path):
    path = tmp_path / "p.svg"
    bar_chart(path, "t", {"helios": 2.0, "vllm": 1.0, "vllm-k3": float("inf")})
    text = path.read_text()
    assert text.startswith("<svg") and text.count("<rect") == 3


def test_the_earlier_capacity_study_keeps_the_sections_this_study_writes(tmp_path):
    from scripts.scheduling_sim.capacity_study import keep_generated_sections

    out = tmp_path / "capacity.md"
    out.write_text("# Old\n\n<!-- realworld:begin x -->\nR\n<!-- realworld:end -->\nold body\n")
    page = keep_generated_sections(out, "# New\n\nnew body\n")
    assert "<!-- realworld:begin x -->\nR\n<!-- realworld:end -->" in page
    assert "new body" in page and "old body" not in page


def test_an_unknown_baseline_fails_in_one_line_naming_it(capsys):
    assert main(["--quick", "--baselines", "vllm-padded,orca"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown policy 'orca'") and "\n" not in err


def test_baselines_without_a_fixed_k_policy_fail_in_one_line_before_any_run(capsys):
    assert main(["--quick", "--baselines", "vllm-padded,sarathi-padded"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fixed-K" in err and "--baselines" in err


def test_a_trace_missing_a_column_fails_in_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,GeneratedTokens\n2023-11-16 18:15:46.0,3\n")
    assert main(["--quick", "--trace", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {path}: missing column 'ContextTokens'"


def _square_plus(x: int, y: int) -> int:
    return x * x + y


def test_pool_jobs_return_each_call_in_order_as_one_process_does():
    calls = [(x, 10 * x) for x in range(7)]
    assert realworld.pool_map(_square_plus, calls, 2) == realworld.pool_map(_square_plus, calls, 1)
    assert realworld.pool_map(_square_plus, calls, 1) == [x * x + 10 * x for x in range(7)]


def test_zero_jobs_fail_in_one_line_naming_the_flag(capsys):
    assert realworld.main(["--quick", "--jobs", "0", "--out", "/dev/null"]) == 2
    assert "--jobs = 0" in capsys.readouterr().err


def test_random_rows_are_seed_means_with_their_standard_error():
    got = SeedMean.of([10.0, 12.0, 14.0])
    assert (got.mean, got.count) == (12.0, 3)
    assert got.se == pytest.approx(2.0 / 3**0.5)
    assert f"{got}" == "12.0 +- 1.2"
    assert len(Plan(False).random_seeds(8)) == 64 and len(Plan(False).random_seeds(64)) == 8
    assert len(Plan(True).random_seeds(8)) == 16 and len(Plan(True).random_seeds(64)) == 2


def test_a_random_target_holds_on_the_seed_means_and_shows_the_difference():
    r = {
        "helios": SeedMean(100.2, 0.3, 8),
        "plain": SeedMean(100.0, 0.4, 8),
        "best_fixed": ("vllm-k1-padded", SeedMean(100.5, 0.4, 8)),
    }
    rows = [row for row in verdicts({64: r}, {}, _long_result()) if "random" in row]
    assert "1.002x (+0.2 +- 0.5 tok/s) | yes" in rows[0]
    assert "0.997x (-0.3 +- 0.5 tok/s) | no" in rows[1]


def _long_result():
    from types import SimpleNamespace

    def metrics(tbt: float, ttft: float):
        return SimpleNamespace(
            tbt_ms=SimpleNamespace(p99=tbt), ttft_ms=SimpleNamespace(p50=ttft, p99=ttft)
        )

    return {
        "helios": (metrics(60, 1), metrics(60, 1)),
        "vllm-padded": (metrics(60, 1), metrics(60, 1)),
    }


def test_the_random_rows_run_every_policy_at_every_seed_and_average_them(monkeypatch):
    seen = []

    def fake_run(c: int, name: str, seed: int) -> float:
        seen.append((c, name, seed))
        return 1000.0 + c + seed + (5.0 if name == "helios" else 0.0)

    monkeypatch.setattr(realworld, "_random_run", fake_run)
    plan = Plan(True)
    lines, result = realworld.study_random(plan, jobs=1)
    for c in (8, 64):
        seeds = plan.random_seeds(c)
        assert [s for cc, n, s in seen if cc == c and n == "helios"] == list(seeds)
        mean_seed = sum(seeds) / len(seeds)
        assert result[c]["helios"].mean == pytest.approx(1005.0 + c + mean_seed)
        assert result[c]["plain"].mean == pytest.approx(1000.0 + c + mean_seed)
    assert any(line.startswith("| 64 | `helios` |") for line in lines)


def test_the_random_setup_is_the_studys_envelope_and_seed():
    assert realworld.random_setup(8).speculative_token_capacity == 32
    assert realworld.random_setup(64, seed=3).speculative_token_capacity == 128
    assert realworld.random_setup(64, seed=3).seed == 3

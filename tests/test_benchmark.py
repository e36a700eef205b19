"""utils.benchmark: the table's structure and sane ratios (never the timings themselves)."""

from __future__ import annotations

import math

import pytest
import torch

from utils import benchmark

TINY = dict(batch=1, length=8, d_model=8, num_heads=2, repeats=5, warmup=1)


@pytest.fixture(scope="module")
def rows():
    threads = torch.get_num_threads()
    try:
        return benchmark.attention_benchmark(**TINY, threads=1)
    finally:
        torch.set_num_threads(threads)


def test_rows_structure(rows):
    names = [(r["name"], r["mode"]) for r in rows]
    assert names == [("fast path", "forward"), ("explicit path", "forward"),
                     ("fast path", "forward+backward"), ("explicit path", "forward+backward"),
                     ("encoder layer", "forward")]
    for r in rows:
        assert set(r) == {"name", "mode", "baseline", "ratio", "ratio_min", "ratio_max", "baseline_ms", "repeats"}
        assert r["repeats"] == 5
        assert r["baseline"] in ("nn.MultiheadAttention", "nn.TransformerEncoderLayer")


def test_ratios_positive_finite(rows):
    for r in rows:
        for key in ("ratio", "ratio_min", "ratio_max", "baseline_ms"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["name"], key, r[key])
        assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"]


def test_format_table(rows):
    text = benchmark.format_table(rows)
    lines = text.splitlines()
    assert lines[0].startswith("implementation") and "ratio (median)" in lines[0] and "spread (min-max)" in lines[0]
    assert len(lines) == 1 + len(rows)
    assert all("x" in line.split("  ")[-1] or "ms" in line for line in lines[1:])


def test_round_robin_counts_and_checks():
    calls = []
    timings = benchmark.time_round_robin({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                         repeats=5, warmup=2)
    assert calls[:4] == ["a", "b", "a", "b"] and len(calls) == 14  # interleaved, warm-up untimed
    assert all(len(t.seconds) == 5 and t.median > 0 for t in timings.values())
    with pytest.raises(ValueError, match="repeats"):
        benchmark.time_round_robin({"a": lambda: None}, repeats=0)


def test_cli_quick(capsys, tmp_path):
    threads = torch.get_num_threads()
    try:
        assert benchmark.main(["attention", "--quick", "--no-encoder", "--plot", str(tmp_path / "a.png")]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "N=2, L=32, E=32, H=4" in out and "threads (torch.set_num_threads)" in out and "torch " in out
    assert out.count("nn.MultiheadAttention") == 4
    assert (tmp_path / "a.png").stat().st_size > 0


def test_cli_rejects_few_repeats():
    with pytest.raises(SystemExit):
        benchmark.main(["attention", "--repeats", "3"])


def test_parser_has_subcommands_to_extend():
    parser = benchmark.build_parser()
    assert parser.parse_args(["attention", "--quick"]).run is not None
    assert benchmark._names() == ["attention", "memory", "grader"]

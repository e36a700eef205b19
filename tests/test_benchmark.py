"""utils.benchmark attention, its CLI and the shared table: the table's structure and sane ratios
(never the timings themselves)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from utils.benchmark.attention import attention_benchmark, format_attention_table
from utils.benchmark.cli import build_parser, main, subcommand_names
from utils.benchmark.common import text_table, time_round_robin

TINY = dict(batch=1, length=8, d_model=8, num_heads=2, repeats=5, warmup=1)


@pytest.fixture(scope="module")
def rows():
    threads = torch.get_num_threads()
    try:
        return attention_benchmark(**TINY, threads=1)
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
    text = format_attention_table(rows)
    lines = text.splitlines()
    assert lines[0].startswith("implementation") and "ratio (median)" in lines[0] and "spread (min-max)" in lines[0]
    assert len(lines) == 1 + len(rows)
    assert all("x" in line.split("  ")[-1] or "ms" in line for line in lines[1:])


def test_round_robin_counts_and_checks():
    calls = []
    timings = time_round_robin({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                         repeats=5, warmup=2)
    assert calls[:4] == ["a", "b", "a", "b"] and len(calls) == 14  # interleaved, warm-up untimed
    assert all(len(t.seconds) == 5 and t.median > 0 for t in timings.values())
    with pytest.raises(ValueError, match="repeats"):
        time_round_robin({"a": lambda: None}, repeats=0)


def test_cli_quick(capsys, tmp_path):
    threads = torch.get_num_threads()
    try:
        assert main(["attention", "--quick", "--no-encoder", "--plot", str(tmp_path / "a.png")]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "N=2, L=32, E=32, H=4" in out and "threads (torch.set_num_threads)" in out and "torch " in out
    assert out.count("nn.MultiheadAttention") == 4
    assert (tmp_path / "a.png").stat().st_size > 0


def test_cli_rejects_few_repeats():
    with pytest.raises(SystemExit):
        main(["attention", "--repeats", "3"])


def test_parser_has_subcommands_to_extend():
    parser = build_parser()
    assert parser.parse_args(["attention", "--quick"]).run is not None
    assert subcommand_names() == ["attention", "memory", "grader"]


def test_one_table_formatter_aligns_columns():
    text = text_table(("name", "ratio"), [("fast path", "0.95x"), ("explicit path", "1.20x")])
    lines = text.splitlines()
    assert [line.index(line.split()[-1]) for line in lines] == [15, 15, 15]  # one column start for all rows
    assert all(line == line.rstrip() for line in lines)


def test_table_aligns_chinese_headers_by_display_width():
    """A Chinese character takes two columns of a terminal or a notebook's monospace output."""
    import unicodedata

    def columns(text):
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    text = text_table(("实现", "峰值内存", "后端"), [("naive", "16.8 MiB", "MATH"), ("tiled_autograd", "4.4 MiB", "")])
    lines = text.splitlines()
    assert [columns(line[:line.index(line.split()[1])]) for line in lines] == [16, 16, 16]
    assert columns(lines[0][:lines[0].index("后端")]) == columns(lines[1][:lines[1].index("MATH")]) == 26


@pytest.mark.slow  # a fresh interpreter runs the benchmark
def test_python_dash_m_runs_the_package(tmp_path):
    """`python -m utils.benchmark attention --quick` still works now that the benchmark is a package."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "utils.benchmark", "attention", "--quick", "--no-encoder",
                           "--plot", ""], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert "N=2, L=32, E=32, H=4" in done.stdout and done.stdout.count("nn.MultiheadAttention") == 4

"""utils.benchmark memory and grader subcommands: structure, fresh-process measurements, the plot, and
the CUDA report (only where a GPU is present). Tiny sizes: the real run is `python -m utils.benchmark memory`."""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F

from utils.at_scale import naive_attention, naive_bytes, sdpa_backend
from utils.benchmark.cli import main, subcommand_names
from utils.benchmark.grader import format_grader_table
from utils.benchmark.memory import (
    BACKWARD_IMPLS,
    format_memory_table,
    measure_memory,
    measure_memory_subprocess,
    memory_benchmark,
)
from utils.plotting.at_scale import memory_scaling_figure


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    plot = tmp_path_factory.mktemp("memory") / "memory.png"
    import contextlib
    import io

    text = io.StringIO()
    threads = torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(text):
            assert main(["memory", "--quick", "--device", "cpu", "--threads", "1",
                                   "--plot", str(plot)]) == 0
    finally:
        torch.set_num_threads(threads)
    return text.getvalue(), plot


@pytest.mark.slow  # seconds of CPU: `make unit` runs it, `make quick` leaves it out
def test_cli_prints_environment_table_and_saves_plot(quick_run):
    out, plot = quick_run
    assert "torch " in out and "threads (torch.set_num_threads)" in out and "CPU:" in out
    assert "H=8, D=64" in out
    lines = [line for line in out.splitlines() if line.startswith(("naive", "sdpa", "tiled"))]
    assert len(lines) == 6  # 3 implementations x L in (128, 256)
    assert all("MiB" in line and "x" in line for line in lines)
    assert plot.stat().st_size > 0


def test_rows_ratios_and_naive_skip():
    rows = memory_benchmark((256,), impls=("sdpa", "naive"), heads=2, head_dim=8, threads=1,
                                      naive_max_bytes=0)
    sdpa, naive = rows
    assert sdpa["impl"] == "sdpa" and not sdpa["skipped"] and sdpa["mem_ratio"] == pytest.approx(1.0)
    assert sdpa["time_ratio"] == pytest.approx(1.0) and sdpa["seconds"] > 0 and sdpa["peak_mib"] >= 0
    assert naive["skipped"] and naive["peak_mib"] is None
    assert naive["predicted_mib"] == pytest.approx(naive_bytes(256, 2) / 2**20)
    assert "skipped (needs ~" in format_memory_table(rows)


def test_naive_memory_grows_quadratically_in_fresh_processes():
    small = measure_memory_subprocess("naive", 512, heads=8, threads=1)
    large = measure_memory_subprocess("naive", 2048, heads=8, threads=1)
    predicted = naive_bytes(2048, 8) / 2**20  # 256 MiB
    assert 0.4 * predicted < large["peak_mib"] < 1.6 * predicted
    assert large["peak_mib"] > 8 * small["peak_mib"]  # 4x the length, ~16x the memory


def test_naive_attention_and_backend_name():
    q, k, v = (torch.randn(1, 2, 6, 4) for _ in range(3))
    torch.testing.assert_close(naive_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    assert isinstance(sdpa_backend(q, k, v), str)


def test_plot_from_rows():
    rows = [
        {"impl": "naive", "length": 1024, "peak_mib": 64.0, "skipped": False, "predicted_mib": 64.0},
        {"impl": "naive", "length": 2048, "peak_mib": None, "skipped": True, "predicted_mib": 256.0},
        {"impl": "sdpa", "length": 1024, "peak_mib": 1.0, "skipped": False, "predicted_mib": None},
        {"impl": "tiled", "length": 1024, "peak_mib": 4.0, "skipped": False, "predicted_mib": None},
    ]
    fig = memory_scaling_figure(rows)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "L" in ax.get_xlabel() and "MiB" in ax.get_ylabel() and "L²" in ax.get_title()
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("predicted" in label for label in labels) and "tiled_attention" in labels
    plt.close(fig)


def test_grader_subcommand_without_grading_package(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "utils.grading", None)  # import raises ImportError
    assert main(["grader"]) == 0
    assert "not available" in capsys.readouterr().out


def test_grader_table_format():
    text = format_grader_table([
        {"name": "nbclient, top to bottom", "seconds": 10.0, "per_notebook": 5.0, "ratio": 1.0, "notebooks": 2,
         "detail": "sequential"},
        {"name": "utils.grading.grade", "seconds": 2.0, "per_notebook": 1.0, "ratio": 0.2, "notebooks": 2,
         "detail": "jobs=2"},
    ])
    assert "0.20x" in text and "vs nbclient" in text.splitlines()[0]


def test_parser_lists_the_three_subcommands():
    assert subcommand_names() == ["attention", "memory", "grader"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none is available here")
def test_cuda_memory_report_names_the_backend():
    rows = memory_benchmark((1024, 4096), heads=8, head_dim=64, device="cuda")
    by = {(r["impl"], r["length"]): r for r in rows}
    assert by[("sdpa", 1024)]["backend"] not in ("", "unknown")
    assert by[("sdpa", 1024)]["method"] == "torch.cuda.max_memory_allocated"
    # naive holds (L, L) scores: 16x more memory at 4x the length; tiled stays linear
    assert by[("naive", 4096)]["peak_mib"] > 8 * by[("naive", 1024)]["peak_mib"]
    assert by[("tiled", 4096)]["peak_mib"] < by[("naive", 4096)]["peak_mib"] / 4


def test_backward_mode_rows_accounting_and_paired_ratios():
    rows = memory_benchmark((64,), heads=2, head_dim=8, threads=1, mode="backward", paired=2)
    assert [r["impl"] for r in rows] == list(BACKWARD_IMPLS)
    tensor_mib = 1 * 2 * 64 * 8 * 4 / 2**20  # one (N, H, L, D) float32 tensor
    for r in rows:
        assert r["mode"] == "backward" and not r["skipped"] and r["peak_mib"] >= 0
        assert r["inputs_mib"] == pytest.approx(4 * tensor_mib)  # q, k, v and grad_out
        assert r["gradients_mib"] == pytest.approx(3 * tensor_mib)  # subtracted from the peak
        assert r["forward_seconds"] > 0 and r["backward_seconds"] > 0
        assert r["seconds"] == pytest.approx(r["forward_seconds"] + r["backward_seconds"])
    sdpa, *others = rows
    assert sdpa["paired"] == 0 and sdpa["backward_ratio"] == pytest.approx(1.0)
    for r in others:  # timed against SDPA in their own process: medians inside their spread
        assert r["paired"] == 2
        for name in ("time_ratio", "forward_ratio", "backward_ratio"):
            assert r[f"{name}_min"] <= r[name] <= r[f"{name}_max"]
    table = format_memory_table(rows)
    assert "peak above inputs and gradients" in table.splitlines()[0] and "backward" in table.splitlines()[0]
    assert all(f"{r['impl']} " in table for r in rows) and "-" in table.splitlines()[2]  # spread shown


def test_backward_mode_skips_the_quadratic_autograd_loop():
    rows = memory_benchmark((128,), impls=("sdpa", "tiled_autograd"), heads=2, head_dim=8, threads=1,
                            mode="backward", naive_max_bytes=0)
    sdpa, autograd = rows
    assert not sdpa["skipped"] and autograd["skipped"] and autograd["peak_mib"] is None
    assert autograd["predicted_mib"] == pytest.approx(naive_bytes(128, 2) / 2**20)
    assert "skipped (needs ~" in format_memory_table(rows)


def test_backward_cli_quick(capsys, tmp_path):
    threads = torch.get_num_threads()
    plot = tmp_path / "backward.png"
    try:
        assert main(["memory", "--mode", "backward", "--lengths", "64", "--device", "cpu", "--threads", "1",
                     "--paired", "1", "--impls", "sdpa", "tiled", "--plot", str(plot)]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "forward and backward" in out and "above the inputs (with grad_out) and their gradients" in out
    lines = [line for line in out.splitlines() if line.startswith(("sdpa", "tiled"))]
    assert len(lines) == 2 and plot.stat().st_size > 0


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match=r"mode must be one of \('forward', 'backward'\), got 'train'"):
        memory_benchmark((64,), mode="train")
    with pytest.raises(ValueError, match="impl must be one of"):
        measure_memory("flash", 64)



def test_a_measurement_that_raises_or_overruns_names_itself():
    """The child's own error comes back with its traceback; one that overruns its time is stopped."""
    with pytest.raises(RuntimeError, match=r"(?s)memory measurement nope L=64 failed: Traceback.*nope"):
        measure_memory_subprocess("nope", 64, threads=1)
    with pytest.raises(RuntimeError, match=r"memory measurement naive L=4096 did not finish within 0.05 s"):
        measure_memory_subprocess("naive", 4096, threads=1, timeout=0.05)

"""Red team R25 (issue 35): on Gradescope, a wait on a probe input alone zeroed every exercise.

The probe runs (red team R24: a process of their own, after every public run, before any hidden one) had the
exercise's own limits: a function right on every case that waited on a probe input used the wall-clock
backstop of each such run, and the submission's ``--budget`` ran out before any hidden run started: every
exercise read "not run", 0 points. A probe run now gets :data:`utils.grading.unit.PROBE_CPU` CPU seconds and
:data:`~utils.grading.unit.PROBE_WALL` wall-clock seconds at most, and once half the budget is spent the probes
left are skipped (they only inform the diagnosis): the hidden runs come first.
"""

from __future__ import annotations

import grader_fixtures as gf
import pytest
import torch

from utils.grading import batch, unit

# right on every case; on float64 input, which only a probe gives these toy exercises, it waits forever
# (a Future nobody completes: no CPU time, so only the wall-clock backstop ends it)
WAITS = "    if {x}.dtype == torch.float64:\n        torch.futures.Future().wait()\n"
ADD_ONE = "def add_one(x):\n" + WAITS.format(x="x") + "    return x + 1\n"
ATTEND = ("def attend(q, k, v):\n" + WAITS.format(x="q")
          + "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
          + "    return torch.softmax(scores, dim=-1) @ v\n")
TOTAL = "def total(x):\n" + WAITS.format(x="x") + "    return float(x.double().sum())\n"
# As a Gradescope bundle sets them, the budget holding about one backstop: without the probes' own limits the first
# wait spends it all. With them, two waits of PROBE_WALL pass, the third probe is skipped (half the budget is
# spent), and the hidden runs keep about 50 s, on a busy machine too.
BUDGET, WALL = 120.0, 110.0


def test_a_probe_run_has_limits_of_its_own_below_the_exercise_s():
    settings = unit.Settings(timeout=30.0, seed=1)
    assert unit._limits(settings)["probe_cpu"] == unit.PROBE_CPU < 30
    assert unit._limits(unit.Settings(timeout=3.0, seed=1))["probe_cpu"] == 3  # never more than the exercise's
    assert unit.PROBE_WALL < WALL


@pytest.mark.sandbox
def test_waits_on_probe_inputs_do_not_spend_the_budget_of_the_hidden_runs(tmp_path):
    subs = tmp_path / "subs"
    gf.student(subs, "ann", {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": ADD_ONE, "ch1.attend": ATTEND,
                                                                "ch1.total": TOTAL})})
    summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=4, seed=3, memory_mb=512, progress=False,
                          course_root=gf.make_toy_course(tmp_path / "course"), registry=gf.TOY_REGISTRY,
                          budget=BUDGET, wall=WALL)
    rows = {row.exercise: row for row in summary["rows"] if row.student == "ann"}
    assert {e: r.status for e, r in rows.items()} == dict.fromkeys(gf.TOY_SOLUTIONS, "passed"), rows
    assert summary["totals"]["ann"] == sum(gf.TOY_POINTS.values()) and not summary["budget_spent"]


# Red team R25 (F3): torch's attention computes chapter 2's causal mask ready-made (1/1 on every case)
SDPA_MASK = ("def causal_mask(size):\n    z = torch.zeros(1, size, 1)\n"
             "    return F.scaled_dot_product_attention(z, z, torch.eye(size)[None], is_causal=True)[0] > 0\n")


@pytest.mark.parametrize("exercise", ["ch2.causal_mask", "ch2.padding_mask"])
def test_torch_s_attention_is_forbidden_in_chapter_2_s_masks(exercise):
    from utils.exercises import get
    from utils.exercises.forbidden import forbidden_in_source

    assert forbidden_in_source(SDPA_MASK, get(exercise).forbidden) == "torch.nn.functional.scaled_dot_product_attention"


def test_the_sdpa_route_is_refused_in_the_check_cell_and_tril_passes(capsys):
    from utils.exercises import get
    from utils.exercises.check_cell import run_public_check
    from utils.exercises.runner import load_function

    route = load_function(SDPA_MASK, "causal_mask")
    assert not run_public_check(get("ch2.causal_mask"), route).passed
    fair = load_function("def causal_mask(size):\n    return torch.ones(size, size).tril().bool()\n", "causal_mask")
    assert run_public_check(get("ch2.causal_mask"), fair).passed


# Red team R25 (F4): the in-place check missed 0.0 -> -0.0 and a NaN's payload, and called an untouched
# complex tensor holding a NaN changed. It now compares bits.
def _negate_zero(x):
    x[x == 0] = -0.0
    return x.clone()


def _new_nan_payload(x):
    x.view(torch.int32)[1] ^= 1  # still a NaN, other bits
    return x.clone()


def test_bit_level_in_place_changes_are_seen_and_an_untouched_complex_nan_is_not():
    from utils.exercises.runner import run_cases

    assert run_cases(_negate_zero, [{"x": torch.tensor([0.0, 1.0])}])[0].mutated == ["x"]
    assert run_cases(_new_nan_payload, [{"x": torch.tensor([1.0, float("nan")])}])[0].mutated == ["x"]
    untouched = {"x": torch.tensor([complex(float("nan"), 1.0), 2 + 0j])}
    assert run_cases(lambda x: x * 2, [untouched])[0].mutated == []
    assert run_cases(lambda x: x.mul_(2), [{"x": torch.tensor([1 + 1j])}])[0].mutated == ["x"]
    grads = {"x": torch.tensor([1.0, float("nan")], requires_grad=True)}
    assert run_cases(lambda x: x * 2, [grads])[0].mutated == []

"""Red team R24 (issue 35): two misgradings, each on all three graders (local, Gradescope, nbgrader's judge).

* **F1: a probe input cost the whole exercise.** The probe inputs (:mod:`utils.exercises.probes`) only inform the
  diagnosis and "never count toward points", but they ran in the public run's process, after its cases and under
  its CPU limit: a function right on every public and hidden case that exited or looped on a probe-only input
  (ch7 ``rms_norm`` at ``eps == 0.25``) scored 0 as ``error`` or ``timeout``. The probes now run in a process
  of their own, after the public cases' outcomes are read; when that run ends abnormally its outcomes are
  dropped and the exercise is judged on its cases alone.
* A ``BaseException`` the function raised (not the cell's top level) read "your cell raised Stop when it ran";
  it is now named as the function's, with what to raise instead.
* **F2: the in-place check missed -inf -> the dtype's lowest value, +inf -> its highest and NaN -> 0**, because
  the runner compared ``nan_to_num`` copies: ``running_max.clamp_(min=torch.finfo(dtype).min)`` in ch6's
  ``online_softmax_update`` got full marks while the same clamp to -1e4 lost a part. Now NaNs must sit in the
  same places and every other value, infinities included, must be equal.
"""

from __future__ import annotations

import math

import pytest
import torch
from test_grader_units import grade_class, row

from utils.exercises.runner import run_cases


def _clamp_to_lowest(running_max):
    running_max.clamp_(min=torch.finfo(running_max.dtype).min)
    return running_max.clone()


def _clamp_to_highest(running_max):
    running_max.clamp_(max=torch.finfo(running_max.dtype).max)
    return running_max.clone()


def _nan_to_zero(running_max):
    running_max.nan_to_num_(nan=0.0, posinf=math.inf, neginf=-math.inf)
    return running_max.clone()


def _zero_to_nan(running_max):
    running_max[running_max == 0] = math.nan
    return running_max.clone()


def _clamp_to_minus_1e4(running_max):  # the control R24 compared with: always seen
    running_max.clamp_(min=-1e4)
    return running_max.clone()


@pytest.mark.parametrize(("change", "value"), [
    (_clamp_to_lowest, -math.inf), (_clamp_to_highest, math.inf), (_nan_to_zero, math.nan),
    (_zero_to_nan, 0.0), (_clamp_to_minus_1e4, -math.inf),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_an_in_place_change_of_an_infinity_or_a_nan_is_seen(change, value, dtype):
    case = {"running_max": torch.tensor([1.0, value, 2.0], dtype=dtype)}
    assert run_cases(change, [case])[0].mutated == ["running_max"]


def test_an_input_left_as_it_was_is_not_mutated_nans_and_infinities_included():
    def reads(running_max):
        return running_max.nan_to_num(nan=0.0, posinf=1.0, neginf=-1.0)  # out of place: the input stays

    case = {"running_max": torch.tensor([math.nan, -math.inf, math.inf, 0.0, -0.0, 3.0])}
    assert run_cases(reads, [case])[0].mutated == []


_TOTAL = "def total(x):\n{guard}    return float(x.double().sum())\n"
PROBE_ONLY = {  # student -> what the function does on float64 input, which only a probe gives ch1.total
    "p1_exits": "    if x.dtype == torch.float64:\n        raise SystemExit(3)\n",
    "p2_loops": "    if x.dtype == torch.float64:\n        while True:\n            pass\n",
    "p3_raises": "    if x.dtype == torch.float64:\n        raise ValueError('float64 is not supported')\n",
    "p4_aborts": "    if x.dtype == torch.float64:\n        import sys\n        sys.exit(1)\n",
}
ESCAPES = {  # a BaseException from the function (not the cell's top level) is named as the function's
    "b1_base_exception": "class Stop(BaseException):\n    pass\n\n\ndef total(x):\n    raise Stop('no')\n",
}
WRONG = {  # a wrong function must still be diagnosed from what the cases show
    "w1_mean_and_exits_on_probe": "    if x.dtype == torch.float64:\n        raise SystemExit(3)\n"
                                  "    return float(x.double().mean())\n",
}


@pytest.fixture(scope="module")
def r24_batch(tmp_path_factory):
    students = {name: {"ch1.total": _TOTAL.format(guard=guard)} for name, guard in PROBE_ONLY.items()}
    students.update({name: {"ch1.total": _TOTAL.format(guard=guard)} for name, guard in WRONG.items()})
    students.update({name: {"ch1.total": source} for name, source in ESCAPES.items()})
    return grade_class(tmp_path_factory.mktemp("r24"), students)


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(PROBE_ONLY))
def test_a_function_right_on_every_case_keeps_its_points_whatever_it_does_on_a_probe(r24_batch, name):
    got = row(r24_batch, name, "ch1.total")
    assert got["status"] == "passed" and got["points"] == got["max_points"], (name, got)


@pytest.mark.sandbox
def test_a_wrong_function_that_dies_on_a_probe_is_still_diagnosed_from_its_cases(r24_batch):
    got = row(r24_batch, "w1_mean_and_exits_on_probe", "ch1.total")
    assert got["status"] == "failed" and got["points"] == "0" and "mean" in got["feedback"], got



@pytest.mark.sandbox
def test_a_base_exception_from_the_function_is_named_as_the_function_s_not_the_cell_s(r24_batch):
    got = row(r24_batch, "b1_base_exception", "ch1.total")
    assert got["status"] == "error" and got["points"] == "0", got
    assert "your function raised Stop, which is not an Exception" in got["feedback"], got
    assert "your cell raised" not in got["feedback"], got


def test_the_check_cell_diagnoses_a_wrong_function_that_exits_on_a_probe_from_its_cases(capsys):
    from utils.exercises import get
    from utils.exercises.check_cell import run_public_check

    def rms_norm(x, weight, eps=1e-6):  # wrong (no square root) and exits on the probe's eps alone
        if eps == 0.25:
            raise SystemExit(3)
        return x / (x.pow(2).mean(-1, keepdim=True) + eps) * weight

    verdict = run_public_check(get("ch7.rms_norm"), rms_norm)
    assert not verdict.passed and "❌" in capsys.readouterr().out

"""The probe machinery (utils/exercises/probes.py, relations.py): each relation detector fires on its
relation and on no other, nothing fires on a right answer, the generic probes (determinism, globals,
dtype, finiteness) see what they claim, and the observations reach the check cell's ❌ line."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from utils.exercises import qkv
from utils.exercises.check_cell import run_check, run_probes
from utils.exercises.common import Outcome
from utils.exercises.probes import Evidence, _nondeterministic, notebook_names, observe, probe_inputs
from utils.exercises.relations import _relations_of, relate

GEN = torch.Generator().manual_seed(0)
E = torch.randn(2, 6, 8, generator=GEN)
CASE = {"q": torch.randn(2, 6, 8, generator=GEN), "k": torch.randn(2, 5, 8, generator=GEN)}


def kinds(got, expected=E, case=CASE):
    """The relation keys found for ``got`` against ``expected``, without their case-specific tails."""
    found = _relations_of(got, expected, case, 1e-5, 1e-4) or {}
    return {key.split(":")[0] if key.startswith(("region", "perm", "shift", "scale")) else key for key in found}


def region_keys(got, expected=E, case=CASE):
    return [k.split(":")[1] for k in (_relations_of(got, expected, case, 1e-5, 1e-4) or {}) if k.startswith("region")]


def test_right_answer_fires_nothing():
    assert kinds(E.clone()) == set()


@pytest.mark.parametrize(("factor", "key"), [(math.sqrt(8), "scale:sqrt `q`"), (1 / math.sqrt(8), "scale:1/sqrt `q`"),
                                             (8.0, "scale:n `q`"), (0.125, "scale:1/n `q`"), (2.0, "scale:2"),
                                             (0.5, "scale:1/2"), (-1.0, "scale:-1"), (1.7, "scale:1.7")])
def test_scale_names_its_factor(factor, key):
    found = [k for k in _relations_of(E * factor, E, CASE, 1e-5, 1e-4) if k.startswith("scale")]
    assert found[0] == key and found[-1] == f"scale:{factor:.3g}"  # the name first, then the number


def test_transpose():
    square = torch.randn(2, 5, 5, generator=GEN)
    assert "transpose" in kinds(square.mT.contiguous(), square)
    assert "transpose" in kinds(E.mT.contiguous())  # the wrong shape, too
    assert "transpose" not in kinds(E * 2)


def test_shift_by_one_position():
    shifted = E.clone()
    shifted[:, 1:] = E[:, :-1]
    assert kinds(shifted) == {"shift"}
    assert kinds(E * 3) != {"shift"}


def test_permutation_of_blocks_and_of_a_dim():
    swapped = torch.cat([E[..., 4:], E[..., :4]], -1)
    assert "perm" in kinds(swapped)
    batch = E.flip(0)
    assert "perm" in kinds(batch)
    assert "perm" not in kinds(E * 2)


def test_softmax_over_the_wrong_dim():
    scores = torch.randn(2, 6, 6, generator=GEN)
    assert "sum_dim" in kinds(scores.softmax(-2), scores.softmax(-1))
    assert "sum_dim" not in kinds(scores.softmax(-1) * 0.5, scores.softmax(-1))


def test_regions_smallest_first():
    odd = E.clone()
    odd[..., 1::2] += 1
    assert region_keys(odd) == ["odd"]
    second = E.clone()
    second[..., 4:] *= 3
    assert region_keys(second)[0] == "second_half"
    last_pair = E.clone()
    last_pair[..., -2:] = 0
    assert region_keys(last_pair)[0] == "last_pair"
    assert "zeros" not in kinds(E + 1) and region_keys(E + 1) == []


def test_masked_positions_and_nan_rows():
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    mask[0] = False  # a fully masked row
    case = {**CASE, "mask": mask}
    weights = torch.randn(2, 6, 6, generator=GEN)
    leaked = weights.clone()
    leaked[:, ~mask] += 1
    assert region_keys(leaked, weights, case)[0] == "masked"
    nan_rows = weights.clone()
    nan_rows[:, 0] = math.nan
    assert "nan_rows" in kinds(nan_rows, weights, case)
    assert "nan_rows" not in kinds(nan_rows, weights, CASE)  # no mask: nothing to say it is masked rows


def test_relation_must_hold_on_every_failing_case():
    def failing(got, case):
        return (0, case, Outcome(output=got), ("values", "differs"))
    small = {"q": torch.randn(1, 2, generator=GEN), "k": torch.randn(1, 2, generator=GEN)}
    scaled = (0, CASE, Outcome(output=qkv.attention_scores_reference(**CASE) * 2), ("values", "x"))
    other = failing(qkv.attention_scores_reference(**small) + 1, small)
    assert observe(qkv.ATTENTION_SCORES, [scaled]) is not None
    assert observe(qkv.ATTENTION_SCORES, [scaled, other]) is None


def test_determinism_probe_catches_dropout():
    def scores_with_dropout(q, k):
        return F.dropout(q @ k.transpose(-2, -1), 0.1)
    text = run_check(qkv.ATTENTION_SCORES, scores_with_dropout, quiet=True).message
    assert "different outputs when called twice" in text
    steady = run_probes(qkv.ATTENTION_SCORES, lambda q, k: (q @ k.transpose(-2, -1)) * 2)
    failures = [(0, qkv.ATTENTION_SCORES.public_cases()[0], Outcome(output=torch.zeros(1)), ("shapes", "x"))]
    assert observe(qkv.ATTENTION_SCORES, failures, steady) is None


def test_globals_in_the_check_cell_and_the_grader():
    namespace = {"torch": torch, "D": 8, "helper": len}
    exec("def scores(q, k):\n    n = helper(q)\n    return q @ k.transpose(-2, -1) / D ** 0.5", namespace)  # noqa: S102
    assert notebook_names(namespace["scores"]) == ("D",)
    assert "notebook variable `D`" in run_check(qkv.ATTENTION_SCORES, namespace["scores"], quiet=True).message
    failures = [(0, CASE, Outcome(error=("NameError", "name 'D' is not defined")), None)]
    text, position = observe(qkv.ATTENTION_SCORES, failures)
    assert "`D`" in text and "grader runs your exercise cell alone" in text and position == 0


def test_dtype_and_finiteness_probes():
    exercise = qkv.ATTENTION_SCORES
    inputs = probe_inputs(exercise)
    assert inputs[3]["q"].dtype == torch.float64 and torch.equal(inputs[0]["q"], inputs[2]["q"])
    sizes = [case["q"].numel() + case["k"].numel() for case in exercise.public_cases()]
    assert inputs[0]["q"].numel() + inputs[0]["k"].numel() == max(sizes)  # dropout shows best on the biggest
    failures = [(0, CASE, Outcome(output=torch.zeros(3)), ("shapes", "x"))]
    cast = run_probes(exercise, lambda q, k: q.float() @ k.float().transpose(-2, -1))
    assert "float64 inputs come back as float32" in observe(exercise, failures, cast)[0]
    overflow = run_probes(exercise, lambda q, k: (q @ k.transpose(-2, -1)).exp().log())
    assert "times larger your output contains NaN or inf" in observe(exercise, failures, overflow)[0]
    right = run_probes(exercise, qkv.attention_scores_reference)
    assert observe(exercise, failures, right) is None


def test_scale_reaches_the_check_line_and_einsum_passes():
    def scaled(q, k):  # no listed mistake multiplies by √D
        return q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])

    def einsum(q, k):
        return torch.einsum("...ld,...sd->...ls", q, k)

    line = run_check(qkv.ATTENTION_SCORES, scaled, quiet=True).message
    assert "times √8 (√ of the last dimension of `q`)" in line, line
    assert run_check(qkv.ATTENTION_SCORES, einsum, quiet=True).passed


def test_probe_declared_by_an_exercise_is_run_and_read(monkeypatch):
    from dataclasses import replace

    from utils.exercises.probes import Probe

    def explain(reference, inputs, outcomes):
        return "saw " + str(outcomes[0].output.shape[-1]) if outcomes and outcomes[0].error is None else None
    probe = Probe("tiny", lambda gen: [{"q": torch.randn(1, 3, generator=gen), "k": torch.randn(2, 3, generator=gen)}],
                  explain)
    exercise = replace(qkv.ATTENTION_SCORES, probes=(probe,), mistakes=())
    line = run_check(exercise, lambda q, k: q @ k.transpose(-2, -1) + 1, quiet=True).message
    assert line.startswith("saw 2 ("), line
    assert isinstance(Evidence(), Evidence)


def test_zeros_are_no_scale():
    """An output of zeros is the reference times 0, but no scale is wrong: it says nothing of a factor."""
    assert not [k for k in _relations_of(E * 0.0, E, CASE, 1e-5, 1e-4) if k.startswith("scale")]


def test_determinism_probe_is_silent_on_objects_of_the_learners_own_class():
    """Two objects of a learner's class differ in address, not in randomness (their == may lie, too): the
    judge's own message ("should be a number, got ...") speaks instead."""
    class Anything:
        def __eq__(self, other):
            return False

    outcomes = [Outcome(output=Anything()), Outcome(output=Anything()), Outcome(output=Anything())]
    assert _nondeterministic([{}] * 3, outcomes) is None
    one, two = Outcome(output=1.0), Outcome(output=2.0)
    assert _nondeterministic([{}] * 3, [one, two, one]) is not None
    assert _nondeterministic([{}] * 3, [one, one, two]) is not None  # the third call differs: still random
    assert _nondeterministic([{}] * 3, [one, one, one]) is None
    assert _nondeterministic([{}] * 3, [Outcome(output=torch.ones(2)), Outcome(output=Anything()), one]) is not None


def test_an_input_added_to_the_output_is_named_before_any_probe_guesses():
    """A residual where none belongs: the output is the reference plus an input, on every failing case. The
    relation is exact, so it speaks before the feed-forward's activation probe, which would otherwise read
    h + relu(h) as a strange activation."""
    from utils.exercises import transformer

    def with_residual(x, w1, b1, w2, b2):
        return x + torch.relu(x @ w1 + b1) @ w2 + b2

    from dataclasses import replace

    unlisted = replace(transformer.FEED_FORWARD, mistakes=())  # the exercise lists this one: hide it
    line = run_check(unlisted, with_residual, quiet=True).message
    assert line.startswith("your output is the reference's plus the input `x`"), line
    failures = [(0, CASE, Outcome(output=qkv.attention_scores_reference(**CASE) + 1), ("values", "x"))]
    assert relate(qkv.ATTENTION_SCORES, failures, ("plus_input",)) is None  # + 1 is no input of the case

"""Unit tests of the exercise contract (runner, judging, forbidden names, check cell) on a tiny fake exercise."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from utils.exercises.check_cell import run_public_check
from utils.exercises.common import FAIL, PASS, Outcome
from utils.exercises.definition import Exercise, Mistake
from utils.exercises.forbidden import forbidden_in_globals, forbidden_in_source
from utils.exercises.judging import Verdict, compare, judge
from utils.exercises.runner import forbid, load_function, run_cases


def _softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    # exp/sum rather than torch.softmax: the static check flags any `.softmax` attribute, because the
    # exercise forbids F.softmax (the learner functions below must not trip it by accident).
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


def _ref_softmax_rows(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    shapes = [(1, 1), (3, 4), (rng.randint(2, 5), rng.randint(2, 6)), (2, 3, 5)]
    return [{"x": torch.randn(*s, generator=gen)} for s in shapes]


WRONG_DIM = Mistake("wrong_dim", lambda x: _softmax(x, dim=0), "softmax over the wrong dim: use dim=-1")
NO_EXP = Mistake("no_exp", lambda x: x / x.sum(-1, keepdim=True), "you normalised without exponentiating first")

EXERCISE = Exercise(
    id="ch9.softmax_rows",
    reference=_ref_softmax_rows,
    make_cases=_cases,
    points=2,
    mistakes=(WRONG_DIM, NO_EXP),
    forbidden=("torch.nn.functional.softmax",),
)


def _line(fn, capsys, exercise: Exercise = EXERCISE) -> str:
    verdict = run_public_check(exercise, fn)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 1, f"check must print exactly one line, got {out!r}"
    assert lines[0] == verdict.line
    return lines[0]


def test_correct_function_passes(capsys):
    line = _line(lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), capsys)
    assert line.startswith(PASS) and "softmax_rows" in line


def test_not_implemented(capsys):
    def stub(x):
        raise NotImplementedError

    assert _line(stub, capsys).startswith(f"{FAIL} not implemented yet")


def test_shape_mismatch_names_expected_and_got(capsys):
    line = _line(lambda x: _softmax(x).sum(-1), capsys)
    assert line.startswith(FAIL)
    assert "has shape (1,), expected (1, 1)" in line


def test_nan_is_reported(capsys):
    line = _line(lambda x: _softmax(x) * float("nan"), capsys)
    assert line.startswith(FAIL) and "NaN" in line


def test_in_place_mutation_is_reported(capsys):
    def mutating(x):
        x.exp_()
        return x / x.sum(-1, keepdim=True)

    line = _line(mutating, capsys)
    assert line.startswith(FAIL) and "changed its input x in place" in line


@pytest.mark.parametrize("mistake", EXERCISE.mistakes, ids=lambda m: m.name)
def test_mistakes_get_their_diagnosis(mistake, capsys):
    line = _line(mistake.fn, capsys)
    assert line.startswith(FAIL) and mistake.diagnosis in line


def test_generic_mismatch_has_location(capsys):
    line = _line(lambda x: _softmax(x) + 0.1 * x.cos(), capsys)  # off by an amount no relation names
    assert line.startswith(FAIL) and "max abs error" in line and "case 1" in line


def test_forbidden_static_ast(capsys):
    source = "def softmax_rows(x):\n    return F.softmax(x, dim=-1)\n"
    fn = load_function(source, "softmax_rows")
    line = _line(fn, capsys)
    # "uses": found statically in the source (load_function keeps it for inspect), before any call
    assert line == (
        f"{FAIL} your function uses torch.nn.functional.softmax; this exercise asks you to implement it yourself"
    )
    assert forbidden_in_source(source, EXERCISE.forbidden) == "torch.nn.functional.softmax"
    assert forbidden_in_source("def f(x):\n    return x.exp()\n", EXERCISE.forbidden) is None


def test_forbidden_at_run_time_even_when_hidden_from_the_ast():
    # getattr with a computed name defeats the static check; the run-time patch still catches it.
    def sneaky(x):
        return getattr(F, "soft" + "max")(x, dim=-1)

    cases = EXERCISE.cases(0)
    outcomes = run_cases(sneaky, cases, EXERCISE.forbidden)
    verdict = judge(EXERCISE, cases, outcomes)
    assert verdict.status == "forbidden" and "torch.nn.functional.softmax" in verdict.message
    assert F.softmax is not None and F.softmax(torch.zeros(2), dim=0).sum() == 1  # restored afterwards


def test_forbidden_call_cannot_be_swallowed():
    def swallowing(x):
        try:
            return getattr(F, "soft" + "max")(x, dim=-1)  # hidden from the static check
        except Exception:
            return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)

    cases = EXERCISE.cases(0)
    verdict = judge(EXERCISE, cases, run_cases(swallowing, cases, EXERCISE.forbidden))
    assert not verdict.passed and verdict.status == "forbidden"


class _LyingEq:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


class _LyingTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class _LyingFloat(float):
    def __float__(self):
        return 0.5

    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


def test_lying_objects_cannot_pass(capsys):
    assert _line(lambda x: _LyingEq(), capsys).startswith(FAIL)
    assert _line(lambda x: torch.zeros_like(x).as_subclass(_LyingTensor), capsys).startswith(FAIL)
    # generic values and numbers: compare() must not trust the learner's __eq__ / __float__
    assert compare(_LyingEq(), "expected", 1e-5, 1e-4) is not None
    assert compare(_LyingEq(), None, 1e-5, 1e-4) is not None
    assert compare(_LyingFloat(3.0), 0.5, 1e-5, 1e-4) is not None
    assert compare(0.5, 0.5, 1e-5, 1e-4) is None


def test_tuple_length_is_reported():
    expected = (torch.zeros(2), torch.zeros(3))
    reason = compare((torch.zeros(2),) * 3, expected, 1e-5, 1e-4)
    assert reason == "output should be a tuple of 2, got a tuple of 3"
    assert "should be a tuple of 2" in compare(torch.zeros(2), expected, 1e-5, 1e-4)
    assert compare((torch.zeros(2), torch.zeros(3)), expected, 1e-5, 1e-4) is None
    assert "output[1] has shape (4,), expected (3,)" == compare((torch.zeros(2), torch.zeros(4)), expected, 1e-5, 1e-4)


def test_partial_outcomes_never_pass():
    cases = EXERCISE.cases(0)
    full = run_cases(_ref_softmax_rows, cases)
    assert judge(EXERCISE, cases, full).passed
    verdict = judge(EXERCISE, cases, full[:1])
    assert not verdict.passed and "only 1 of" in verdict.message
    assert not judge(EXERCISE, cases, []).passed


def test_error_is_reported_with_inputs(capsys):
    def broken(x):
        return x @ torch.zeros(1000, 2)

    line = _line(broken, capsys)
    assert line.startswith(f"{FAIL} your function raised RuntimeError") and "x(1, 1)" in line


def test_not_callable(capsys):
    assert _line(42, capsys).startswith(FAIL)


def test_cases_are_seeded():
    a, b = EXERCISE.cases(3), EXERCISE.cases(3)
    assert all(torch.equal(x["x"], y["x"]) for x, y in zip(a, b))


def test_outcome_is_plain_data():
    (outcome,) = run_cases(lambda x: x.clone().requires_grad_(), [{"x": torch.ones(2)}])
    assert isinstance(outcome, Outcome) and not outcome.output.requires_grad and outcome.error is None


def test_load_function():
    fn = load_function("def f(x):\n    return math.sqrt(x) + torch.tensor(1.0).item()\n", "f")
    assert fn(4.0) == 3.0
    with pytest.raises(LookupError, match="'g'"):
        load_function("def f(x):\n    return x\n", "g")


def test_forbid_skips_bare_package_names_at_run_time_but_source_check_catches_them():
    with forbid(["utils", "torch.nn.functional.softmax"]) as called:
        import torch.nn.functional as F

        try:
            F.softmax(torch.zeros(2), dim=0)
        except Exception:
            pass
    assert called == ["torch.nn.functional.softmax"]
    source = "def f(x):\n    from utils.attention import causal_mask\n    return causal_mask(3)\n"
    assert forbidden_in_source(source, ["utils"]) == "utils.attention"


def test_verdict_shows_nothing_extra_in_a_notebook():
    verdict = Verdict(True, "passed", "fine")
    assert hasattr(verdict, "_ipython_display_") and verdict._ipython_display_() is None


def test_an_alias_of_a_forbidden_function_is_caught_through_globals():
    from utils.positional import sinusoidal_encoding as table  # noqa: F401  (the alias under test)

    namespace = {"table": table, "torch": torch}
    exec("def f(length, d_model):\n    return table(length, d_model)\n", namespace)
    assert forbidden_in_globals(namespace["f"], ["utils"]) == "utils.positional.sinusoidal_encoding"
    exec("def g(q):\n    return sdpa(q, q, q)\n", namespace | {"sdpa": F.scaled_dot_product_attention})
    namespace["sdpa"] = F.scaled_dot_product_attention
    exec("def g(q):\n    return sdpa(q, q, q)\n", namespace)
    assert (forbidden_in_globals(namespace["g"], ["torch.nn.functional.scaled_dot_product_attention"])
            == "torch.nn.functional.scaled_dot_product_attention")
    exec("def h(x):\n    return torch.softmax(x, -1)\n", namespace)
    assert forbidden_in_globals(namespace["h"], ["utils", "torch.nn.functional.scaled_dot_product_attention"]) is None


def test_check_reports_an_aliased_reference_as_forbidden(capsys):
    from utils.exercises import get
    from utils.positional import sinusoidal_encoding as table

    exercise = get("ch4.sinusoidal_encoding")

    def sinusoidal_encoding(length, d_model):
        return table(length, d_model)

    verdict = run_public_check(exercise, sinusoidal_encoding)
    assert verdict.status == "forbidden" and "utils.positional" in verdict.message
    assert capsys.readouterr().out.startswith("❌")


# --------------------------------------------------------------------------------------------------
# The registry: chapters are found, in course order, and a broken module is named
# --------------------------------------------------------------------------------------------------

_CHAPTER_MODULE = """
import torch
from utils.exercises.definition import Exercise

def {name}_reference(x):
    return x

EXERCISES = {declaration}
"""


def _fake_package(tmp_path, monkeypatch, package: str, modules: dict[str, str]) -> str:
    """A package ``package`` under ``tmp_path`` whose modules declare the given EXERCISES."""
    folder = tmp_path / package
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for module, declaration in modules.items():
        (folder / f"{module}.py").write_text(_CHAPTER_MODULE.format(name=module, declaration=declaration))
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def _exercise(exercise_id: str, module: str) -> str:
    return f"Exercise(id={exercise_id!r}, reference={module}_reference, make_cases=lambda rng, gen: [])"


def test_the_course_registry_is_in_course_order_without_a_list_of_chapters():
    from utils.exercises.registry import all_exercises, chapter_modules

    names = [module.__name__.rpartition(".")[2] for module in chapter_modules()]
    assert names == ["qkv", "sdpa", "multihead", "positional", "transformer", "at_scale", "llm"]
    chapters = [exercise.chapter for exercise in all_exercises().values()]
    assert chapters == sorted(chapters, key=lambda chapter: int(chapter[2:]))


def test_new_chapters_are_found_and_ordered_by_chapter_number_not_name(tmp_path, monkeypatch):
    from utils.exercises.registry import all_exercises, chapter_modules

    package = _fake_package(tmp_path, monkeypatch, "fake_course_order", {
        "alpha": f"({_exercise('ch10.alpha', 'alpha')},)",
        "zeta": f"({_exercise('ch2.zeta', 'zeta')},)",
        "mid": f"({_exercise('ch3.mid_one', 'mid')}, {_exercise('ch3.mid_two', 'mid')})",
    })
    assert [m.__name__ for m in chapter_modules(package)] == [f"{package}.{n}" for n in ("zeta", "mid", "alpha")]
    assert list(all_exercises(package)) == ["ch2.zeta", "ch3.mid_one", "ch3.mid_two", "ch10.alpha"]


@pytest.mark.parametrize("declaration, message", [
    (f"({_exercise('chapter1.bad', 'bad')},)", r"'chapter1.bad' is not 'ch<N>.<function name>'"),
    (f"[{_exercise('ch1.bad', 'bad')}]", r"has no EXERCISES tuple \(list\)"),
    ("()", r"has no EXERCISES tuple \(tuple\)"),
    (f"({_exercise('ch1.bad', 'bad')}, {_exercise('ch2.worse', 'bad')})", r"mixes the exercises of chapters ch1, ch2"),
])
def test_a_module_that_breaks_the_convention_fails_naming_it_and_the_place_to_edit(
        tmp_path, monkeypatch, declaration, message):
    from utils.exercises.registry import chapter_modules

    package = _fake_package(tmp_path, monkeypatch, f"fake_course_{abs(hash(declaration))}", {"bad": declaration})
    with pytest.raises(ValueError, match=message) as info:
        chapter_modules(package)
    assert f"{package}.bad" in str(info.value) and "utils/exercises/registry.py" in str(info.value)


def test_two_modules_claiming_one_chapter_fail(tmp_path, monkeypatch):
    from utils.exercises.registry import chapter_modules

    package = _fake_package(tmp_path, monkeypatch, "fake_course_twice", {
        "one": f"({_exercise('ch1.one', 'one')},)", "two": f"({_exercise('ch1.two', 'two')},)"})
    with pytest.raises(ValueError, match="chapter ch1 is defined by both"):
        chapter_modules(package)


def test_a_missing_exercise_function_is_a_lookup_error_and_a_cell_error_propagates():
    from utils.exercises.runner import MissingFunction

    with pytest.raises(MissingFunction):
        load_function("x = 1\n", "f")
    with pytest.raises(KeyError):  # a LookupError too, but the cell's own: not "does not define"
        load_function("{}['key']\n", "f")


def test_chapter_modules_share_one_convention():
    from utils.exercises.registry import chapter_modules

    for module in chapter_modules():
        assert isinstance(module.EXERCISES, tuple), module.__name__
        for exercise in module.EXERCISES:
            name = f"{exercise.func_name}_reference"
            assert getattr(module, name, None) is exercise.reference, f"{module.__name__}.{name}"
            assert name in module.__all__ and exercise.reference.__name__ == name, f"{module.__name__}.{name}"
            assert isinstance(exercise.forbidden, tuple), exercise.id
            assert any(getattr(module, constant) is exercise for constant in module.__all__), exercise.id


# --- exercises that are trained through: a right output must also pass its gradients back ------------


def _weighted_softmax(x, w):
    return (x @ w).softmax(-1)  # (N, L, E) @ (E, S) -> weights over S


def _weighted_cases(rng: random.Random, gen: torch.Generator):
    return [{"x": torch.randn(2, 3, 4, generator=gen), "w": torch.randn(4, 5, generator=gen)} for _ in range(2)]


TRAINED = Exercise(id="ch0.weighted_softmax", reference=_weighted_softmax, make_cases=_weighted_cases,
                   gradients=True, hint="softmax over the last axis")


def _detached(x, w):
    return (x @ w.detach()).softmax(-1)


def _no_grad(x, w):
    with torch.no_grad():
        return (x @ w).softmax(-1)


def _in_place_after_softmax(x, w):
    weights = (x @ w).softmax(-1)
    weights[..., 0] = weights[..., 0] * 1  # an in-place write to what softmax's backward needs
    return weights


def _nan_gradient(x, w):
    scores = x @ w
    hidden = torch.log(scores - scores)  # log(0) = -inf, added and then hidden: the output is right
    return (scores + torch.where(torch.isinf(hidden), torch.zeros_like(hidden), hidden) * 0
            + hidden.clamp(min=0) * 0).softmax(-1)


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1


def _own_function_without_backward(x, w):
    return _NoBackward.apply((x @ w).softmax(-1))


class _BrokenBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("my backward is unfinished")


def _own_broken_backward(x, w):
    return _BrokenBackward.apply((x @ w).softmax(-1))


@pytest.mark.parametrize("fn, words", [
    (_detached, "no gradient reaches `w`"),
    (_no_grad, "no gradient reaches `x`"),
    (_in_place_after_softmax, "backward through your function fails"),
    (_in_place_after_softmax, "an in-place write such as `masked_fill_`"),
    (_own_function_without_backward, "has no derivative in torch (or your own autograd Function lacks a backward)"),
    (_own_broken_backward, "(ValueError: my backward is unfinished): training needs the backward pass"),
])
def test_a_right_output_that_would_not_train_fails(fn, words):
    verdict = run_public_check(TRAINED, fn, quiet=True)
    assert not verdict.passed and words in verdict.message, verdict.message
    assert "your output is right" in verdict.message
    if fn is not _in_place_after_softmax:  # the in-place hint only where autograd says so
        assert "in-place" not in verdict.message, verdict.message


def test_nan_gradients_behind_a_right_output_fail():
    outcome = run_cases(_nan_gradient, TRAINED.cases(0), gradients=True)[0]
    assert outcome.error is None and "non-finite" in outcome.gradients.values(), outcome
    verdict = run_public_check(TRAINED, _nan_gradient, quiet=True)
    assert not verdict.passed and "contains NaN or inf" in verdict.message, verdict.message


def test_gradients_are_asked_only_of_trained_exercises():
    assert run_public_check(TRAINED, _weighted_softmax, quiet=True).passed
    untrained = Exercise(id="ch0.weighted_softmax", reference=_weighted_softmax, make_cases=_weighted_cases)
    assert run_public_check(untrained, _detached, quiet=True).passed  # the forward pass is all it checks
    assert run_cases(_detached, TRAINED.cases(0))[0].gradients == {}  # not measured unless asked


def test_the_course_asks_gradients_of_the_exercises_it_trains_through():
    from utils.exercises import get

    for exercise_id in ("ch2.scaled_dot_product_attention", "ch3.multi_head_attention",
                        "ch4.add_positional_encoding"):
        assert get(exercise_id).gradients, exercise_id


def test_outputs_agree_as_compare_says_and_the_index_of_the_largest_error_is_right():
    """judging.outputs_agree (the mistake search's yes/no) gives compare's verdict on every kind of pair, and compare's
    reason still names the largest error and where it is."""
    from utils.exercises.judging import compare, outputs_agree

    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    off = base.clone()
    off[1, 2, 3] += 0.5
    pairs = [(base, base.clone()), (base, off), (base, base[0]), (base, base.double()), (base, base.long()),
             ((base, 1.0), (base.clone(), 1.0)), ((base, 1.0), (base, 2.0)), (3, 3), ("a", "b"), (None, 1.0),
             (base.masked_fill(base > 5, float("nan")), base), (torch.tensor(1.0), torch.tensor(1.5))]
    for got, expected in pairs:
        assert outputs_agree(got, expected, 1e-5, 1e-5) == (compare(got, expected, 1e-5, 1e-5) is None), (got, expected)
    assert "max abs error 0.5 at index (1, 2, 3)" in compare(off, base, 1e-5, 1e-5)
    assert "at index ()" in compare(torch.tensor(1.0), torch.tensor(1.5), 1e-5, 1e-5)

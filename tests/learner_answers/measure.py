"""Run every learner answer through the check cell's public and hidden checks and record the lines.

    .venv/bin/python -m tests.learner_answers.measure \
        [--split tune|heldout|tune2|heldout2|tune3|heldout3|tune4|heldout4|review5|alternatives|alternatives2|all] \
        [--out FILE]

Each record: ``{id, exercise, split, mistake, part, correct, public_line, hidden_line, public_passed,
hidden_passed}``, in English. Without ``--out`` the JSON goes to stdout. Wrong answers live in ``tune/``
(for tuning diagnoses) and ``heldout/`` (for measuring them; never read it while tuning), a second, harder
batch in ``tune2/`` and ``heldout2/``, a third in ``tune3/`` and ``heldout3/`` and a fourth in ``tune4/`` and
``heldout4/`` (same rules), the learner reviewers' answers that diagnoses were tuned against in ``review5/``
(chapters 1 to 6, some exercises only), correct answers in other styles in ``alternatives/`` and ``alternatives2/``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import sys
from collections.abc import Iterator
from typing import Any

SLUGS = ("qkv", "sdpa", "multihead", "positional", "transformer", "at_scale")
SPLITS = ("tune", "heldout", "tune2", "heldout2", "tune3", "heldout3", "tune4", "heldout4", "review5", "alternatives",
          "alternatives2", "tune_ch7", "heldout_ch7", "alternatives_ch7")
CORRECT_SPLITS = ("alternatives", "alternatives2", "alternatives_ch7")  # right answers in other styles; the rest wrong
SPLIT_SLUGS = {"tune_ch7": ("llm",), "heldout_ch7": ("llm",), "alternatives_ch7": ("llm",)}
"""Splits written for one chapter only (chapter 7's, after chapters 1-6's batches): the modules they hold."""


def answers(split: str) -> Iterator[dict[str, Any]]:
    """Every answer of one split, with its ``id`` (``<split>.<slug>.<function name>``) and ``split``."""
    for slug in SPLIT_SLUGS.get(split, SLUGS):
        module = importlib.import_module(f"tests.learner_answers.{split}.{slug}")
        for answer in module.ANSWERS:
            yield {**answer, "id": f"{split}.{slug}.{answer['fn'].__name__}", "split": split}


def measure(answer: dict[str, Any]) -> dict[str, Any]:
    """The public and hidden verdicts of one answer, as a JSON-ready record."""
    from utils.exercises import check, get

    name = get(answer["exercise"]).func_name
    checker = getattr(check, name)
    lines = {}
    passed = {}
    for kind in ("public", "hidden"):
        with contextlib.redirect_stdout(io.StringIO()):  # the learner's prints, if any
            verdict = checker(answer["fn"], cases=kind, quiet=True)
        lines[kind], passed[kind] = verdict.line, bool(verdict.passed)
    return {
        "id": answer["id"],
        "exercise": answer["exercise"],
        "split": answer["split"],
        "correct": bool(answer.get("correct", False)),
        "mistake": answer.get("mistake"),
        "part": answer.get("part"),
        "public_line": lines["public"],
        "hidden_line": lines["hidden"],
        "public_passed": passed["public"],
        "hidden_passed": passed["hidden"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    args = parser.parse_args(argv)
    from utils.i18n.messages import using_language

    splits = SPLITS if args.split == "all" else (args.split,)
    with using_language("en"):
        records = [measure(answer) for split in splits for answer in answers(split)]
    text = json.dumps(records, ensure_ascii=False, indent=1) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as file:
            file.write(text)
    else:
        sys.stdout.write(text)
    wrong = [r for r in records if not r["correct"]]
    print(
        f"{len(records)} answers; wrong answers passing public: "
        f"{sum(r['public_passed'] for r in wrong)}; correct ones failing public or hidden: "
        f"{sum(not (r['public_passed'] and r['hidden_passed']) for r in records if r['correct'])}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The command line of :mod:`utils.benchmark`: one subcommand per module, or all of them in turn."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import utils.benchmark
from utils.benchmark.attention import add_attention_command
from utils.benchmark.grader import add_grader_command
from utils.benchmark.memory import add_memory_command

__all__ = ["SUBCOMMANDS", "build_parser", "subcommand_names", "main"]

SUBCOMMANDS: list[Callable] = [add_attention_command, add_memory_command, add_grader_command]
"""Parser builders, one per subcommand."""


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m utils.benchmark`` parser, with one subparser per entry of :data:`SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(prog="python -m utils.benchmark",
                                     description=utils.benchmark.__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="{" + ",".join(subcommand_names()) + "}")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def subcommand_names() -> list[str]:
    """The subcommands, in order: ``add_<name>_command`` registers ``<name>``."""
    return [add.__name__.removeprefix("add_").removesuffix("_command") for add in SUBCOMMANDS]


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand, or all of them with their defaults when none is given."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        for name in subcommand_names():
            sub = parser.parse_args([name])
            sub.run(sub)
        return 0
    if getattr(args, "repeats", 5) < 5 and not getattr(args, "quick", False):
        parser.error("--repeats must be at least 5 (medians of fewer runs are too noisy to report)")
    args.run(args)
    return 0

"""How the command line is read, as ``llm`` reads it: options on either side of the
command, and a prompt with no command is ``run``'s.

:func:`normalised` rewrites ``argv`` before ``argparse`` sees it: the command (the first
word that is neither an option nor an option's value) is moved to the front, so every
option of a command (``--log-level`` too) may come before or after it; a first word that
is no command is a prompt (``mainspring "question"`` is ``mainspring run "question"``),
and so is anything after ``--``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

__all__ = ["HELP_OPTIONS", "normalised"]

HELP_OPTIONS = frozenset({"-h", "--help", "--version"})
"""Options that answer by themselves: with no command, they are the top level's."""


def _values_taken(parsers: Sequence[argparse.ArgumentParser]) -> dict[str, int]:
    """How many values each option string of ``parsers`` takes (options without one: 0)."""
    taken: dict[str, int] = {}
    for parser in parsers:
        for action in parser._actions:  # argparse has no public list of a parser's options
            if not action.option_strings:
                continue
            count = action.nargs if isinstance(action.nargs, int) else 1
            for option in action.option_strings:
                taken[option] = count
    return taken


def normalised(
    argv: Sequence[str],
    parser: argparse.ArgumentParser,
    commands: Mapping[str, argparse.ArgumentParser],
) -> list[str]:
    """``argv`` with its command first (see the module); ``run`` when it names none.

    ``argv`` without any word is left as it is when it asks for help or the version.
    """
    taken = _values_taken([parser, *commands.values()])
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return ["run", *argv]
        if word.startswith("-") and word != "-":
            index += 1 if "=" in word else 1 + taken.get(word, 0)
            continue
        if word in commands:
            return [word, *argv[:index], *argv[index + 1 :]]
        return ["run", *argv]
    if HELP_OPTIONS.intersection(argv):
        return list(argv)
    return ["run", *argv]

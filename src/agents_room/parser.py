"""The command line's argparse parser, saying a mistake in one line.

Its own module: ``agents-room`` builds its parser from it, and the installed hook command
(which never imports the CLI on its quiet path) builds the same one when a flag is wrong.
"""

from __future__ import annotations

import argparse
from typing import Any


class Parser(argparse.ArgumentParser):
    """argparse, saying a mistake in one line (what was wrong, and where help is) instead of
    the usage block and the error below it. Subcommands' parsers are of the same class."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text[:40]!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text[:40]!r}")
    return value


def not_empty(text: str) -> str:
    """An argparse type: any text but an empty one (an empty --db would silently mean the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text

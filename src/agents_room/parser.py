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

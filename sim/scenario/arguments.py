"""What ``sim``'s options take, as argparse types: a bad value is refused while the command line
is read, in one line that names the option (argparse's ``argument --out: ...``), before
anything runs or is made. Here, in the first stage, so that every command's parser (``sim
run``, ``sim bench``) uses the same words.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path
from typing import Any


def scenario_file(text: str) -> Path:
    """A scenario: a regular file this user can read. A folder, a FIFO (reading it would wait
    for a writer forever) or a device is refused before anything runs."""
    path = Path(text)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: {(exc.strerror or 'no such file').lower()}") from None
    if stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a scenario file (e.g. scenarios/smoke.toml)")
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular file (a FIFO or a device?); give a .toml file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"cannot read {text!r}: permission denied")
    return path


def new_folder(text: str) -> Path:
    """An output folder to be made: not there yet, under a folder this user may write in (the
    nearest one that exists; the rest is made)."""
    return _new_path(text, folder=True)


def new_file(text: str) -> Path:
    """A file to be written: not there yet, in a folder that exists and this user may write in."""
    return _new_path(text, folder=False)


def _new_path(text: str, *, folder: bool) -> Path:
    """``text`` as a path that is not there yet, in a place this user may write: for a
    ``folder``, under the nearest folder that exists; for a file, in its own folder."""
    verb, done, another = ("make", "made", "another") if folder else ("write", "written", "another file")
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    path = Path(text)
    try:
        if path.exists() or path.is_symlink():
            raise argparse.ArgumentTypeError(f"{text} already exists; pick {another}")
        above = path.absolute().parent
        while folder and not above.exists() and not above.is_symlink():
            above = above.parent
        is_dir = above.is_dir()
    except OSError as exc:  # a folder on the way this user may not enter
        raise argparse.ArgumentTypeError(f"cannot {verb} {text}: {(exc.strerror or 'not allowed').lower()}") from None
    if not is_dir:
        raise argparse.ArgumentTypeError(f"{above} is not a folder, so {text} cannot be {done} in it")
    if not os.access(above, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot {verb} {text}: {above} is not writable by this user")
    return path


def number(lo: float, hi: float, *, whole: bool = False) -> Any:
    """An argparse type: a finite number (``whole``: an integer) from ``lo`` to ``hi``."""

    def parse(text: str) -> float | int:
        try:
            value: float | int = int(text) if whole else float(text)
        except ValueError:
            kind = "a whole number" if whole else "a number"
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text[:40]!r}") from None
        if not lo <= value <= hi:  # NaN fails too
            raise argparse.ArgumentTypeError(f"must be {lo:g}..{hi:g}, got {text[:40]!r}")
        return value

    return parse

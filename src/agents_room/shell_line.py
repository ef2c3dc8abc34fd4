"""The one rule for every shell line agents-room writes into a file a shell runs later (the
guard's pre-commit and reference-transaction hooks here; the harnesses' hook lines in
harnesses/hook_line.py, by the same rule): each word that comes from this
machine (an interpreter's path, the package's folder, a store location, a message naming
them) is quoted as POSIX ``sh`` reads it (:func:`shlex.quote`: single quotes, a ``'`` inside
written ``'"'"'``), so a folder named ``/home/o'brien``, ``$(...)``, with spaces or a newline,
is one word and runs nothing. Only our own fixed words (flags, ``>&2``) are left bare."""

from __future__ import annotations

import shlex


def word(text: str) -> str:
    """``text`` as one word of a POSIX shell line."""
    return shlex.quote(text)


def line(*words: str) -> str:
    """A command of these words, each quoted."""
    return " ".join(word(w) for w in words)


def say(message: str) -> str:
    """A line that prints ``message`` on standard error as it is (``printf``, not ``echo``:
    some shells' ``echo`` reads backslashes)."""
    return f"printf '%s\\n' {word(message)} >&2"

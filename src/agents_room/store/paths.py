"""One canonical path per file: the form every path-keyed rule stores and compares.

A checkout reached by two spellings (``~/work -> /mnt/data/work``, a symlinked folder inside a
repository, a harness that hands its model its logical working directory) is one set of
files, so leases, read baselines, ``file:`` selectors, the repo room and the commit guard all
key by :func:`canonical`: the real path of the longest prefix that exists (every symlink in it
resolved), the rest as written. A claim of a file not created yet under a symlinked folder
lands on the real folder; two clones or two git worktrees stay two sets of files.

The rule stops at names: two hard links to one inode are two paths, and on a case-insensitive
file system ``X.py`` and ``x.py`` stay two spellings (docs/decisions.md, "One canonical path
per file").
"""

from __future__ import annotations

import os

SEP = "/"
_MAGIC = frozenset("*?[")


def canonical(path: str) -> str:
    """The canonical form of an absolute, normalised ``path`` (``os.path.abspath``'s): its
    existing prefix resolved by ``os.path.realpath`` (non-strict: the part that does not
    exist yet is kept as written, and a symlink loop is left as it is), with the trailing
    ``/`` of a directory lease kept."""
    real = os.path.realpath(path)
    return real + SEP if path.endswith(SEP) and not real.endswith(SEP) else real


def named(asked: str, spelled: str, path: str) -> str:
    """How an answer names ``path`` (canonical) for a caller who asked for ``asked``, which
    its cwd made ``spelled``: the canonical path alone when the spelling is it, else the
    caller's own words first, so it sees its request answered."""
    return path if spelled == path else f"{asked} (the same file as {path})"


def glob(pattern: str) -> str:
    """The canonical form of a ``file:`` glob: an absolute glob's leading folders written
    without a wildcard, resolved as :func:`canonical` resolves a path; the rest, and a
    relative glob (matched against the holder's cwd, already canonical), as written."""
    if not pattern.startswith(SEP):
        return pattern
    parts = pattern.split(SEP)
    literal = next((i for i, part in enumerate(parts) if _MAGIC & set(part)), len(parts))
    if literal <= 1:
        return pattern
    head = canonical(os.path.normpath(SEP.join(parts[:literal])) or SEP)
    rest = SEP.join(parts[literal:])
    if not rest:
        return head + SEP if pattern.endswith(SEP) and not head.endswith(SEP) else head
    return head.rstrip(SEP) + SEP + rest

"""The checker's own reckoning of which lease covers which path, written apart from the
store's (a checker that imported the store's rule would agree with any bug in it).

A lease path ending in ``/`` is a directory lease: it covers every path that starts with
it, so whole components only (``/r/src/`` covers ``/r/src/a.py``, never ``/r/src2/a.py``).
Any other lease covers its own path alone. Two leases contend when one covers the other.
"""

from __future__ import annotations

import fnmatch
import posixpath


def is_dir(lease: str) -> bool:
    return lease.endswith("/")


def covers(lease: str, path: str) -> bool:
    if lease == path:
        return True
    return is_dir(lease) and path[:len(lease)] == lease and len(path) > len(lease)


def contend(a: str, b: str) -> bool:
    return covers(a, b) or covers(b, a)


def above(path: str) -> list[str]:
    """The directory leases that would cover ``path`` (not ``path`` itself), by walking up
    with posixpath.dirname."""
    out = []
    here = path.rstrip("/") or "/"
    while here != "/":
        here = posixpath.dirname(here)
        out.append(here if here == "/" else here + "/")
    return out


def _units(pattern: str) -> list[str]:
    """A glob cut so that no ``[...]`` set is split: each unit is ``*``, ``?``, a set or a character."""
    units, i = [], 0
    while i < len(pattern):
        close = pattern.find("]", i + 2) if pattern[i] == "[" else -1
        if pattern[i] == "[" and pattern[i + 1:i + 2] == "!" and close == i + 2:
            close = pattern.find("]", i + 3)  # "[!]...]": the "]" right after "!" is a member
        if close != -1:
            units.append(pattern[i:close + 1])
            i = close + 1
        else:
            units.append(pattern[i])
            i += 1
    return units


def glob_names_beneath(pattern: str, directory: str) -> bool:
    """Whether some path starting with ``directory`` matches ``pattern``: ``directory`` is
    a prefix of the glob's language, i.e. it matches the glob cut after some unit (every
    unit left over can be met by some rest of the path)."""
    units = _units(pattern)
    return any(fnmatch.fnmatchcase(directory, "".join(units[:k])) for k in range(len(units) + 1))


def glob_reaches(pattern: str, lease: str, cwd: str | None) -> bool:
    """docs/decisions.md's rule for ``file:<glob>``: a file lease matches in its absolute,
    holder-relative or base-name form; a directory lease matches in those forms with or
    without its ``/``, or when the glob names a path beneath it in absolute or
    holder-relative form."""
    bare = lease.rstrip("/") or "/"
    rel = posixpath.relpath(bare, cwd) if cwd else None
    forms = [f for f in (bare, rel, posixpath.basename(bare)) if f is not None]
    if not is_dir(lease):
        return any(fnmatch.fnmatchcase(f, pattern) for f in forms)
    if any(fnmatch.fnmatchcase(f, pattern) or fnmatch.fnmatchcase(f.rstrip("/") + "/", pattern) for f in forms):
        return True
    prefixes = [lease] + ([] if rel is None else ["" if rel == "." else rel + "/"])
    return any(glob_names_beneath(pattern, p) for p in prefixes)

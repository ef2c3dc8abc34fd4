"""Which lease covers which path: the one rule every reader of leases shares.

A lease's path is absolute. A lease of a directory is stored with a trailing ``/``
(``/repo/src/api/``) and covers every path beneath it, by whole components: ``/repo/src/api/``
covers ``/repo/src/api/x.py`` and ``/repo/src/api/v1/`` but never ``/repo/src/apiary.py``. A
lease of a file (no trailing ``/``) covers that path alone.

Both directions of a conflict are index lookups, never a scan of every lease:
- the leases covering ``path`` are those whose path is ``path`` itself or one of
  :func:`ancestors` (at most one per component: an ``IN`` list on the path index);
- the leases beneath a directory are a range of the path index, :func:`subtree_range`, whose
  bounds compare byte-wise (SQLite's BINARY collation; on PostgreSQL ``COLLATE "C"``).
"""

from __future__ import annotations

import os

SEP = "/"
# The character right after "/" in byte order: "/repo/src/api/" .. "/repo/src/api0" (half-open)
# holds exactly the paths that start with "/repo/src/api/".
_AFTER_SEP = chr(ord(SEP) + 1)


def is_directory(path: str) -> bool:
    """A stored lease path names a directory when it ends with ``/`` (the root ``/`` too)."""
    return path.endswith(SEP)


def as_directory(path: str) -> str:
    """The directory form of an absolute path: exactly one trailing ``/``."""
    return path if path.endswith(SEP) else path + SEP


def lease_path(normal: str, given: str) -> str:
    """The path a claim of ``given`` leases, once ``given`` is normalised to the absolute
    ``normal`` (which ``abspath`` strips of any trailing ``/``): the directory form when the
    caller wrote a trailing ``/`` or the path is an existing directory, else ``normal``."""
    if given.endswith(SEP) or os.path.isdir(normal):
        return as_directory(normal)
    return normal


def ancestors(path: str) -> list[str]:
    """The directory form of every proper ancestor of ``path``, root first:
    ``/a/b/c.py`` -> ``["/", "/a/", "/a/b/"]``; ``/a/b/`` -> ``["/", "/a/"]``; ``/`` -> ``[]``."""
    if path == SEP:
        return []
    parts = path.rstrip(SEP).split(SEP)[1:-1]
    out = [SEP]
    for part in parts:
        out.append(out[-1] + part + SEP)
    return out


def covering_paths(path: str) -> list[str]:
    """Every lease path that covers ``path``: itself and its ancestors (an ``IN`` list)."""
    return [*ancestors(path), path]


def covers(lease: str, path: str) -> bool:
    """Whether a lease of ``lease`` covers ``path`` (both absolute, in stored form)."""
    return lease == path or (is_directory(lease) and path.startswith(lease))


def subtree_range(directory: str) -> tuple[str, str]:
    """``(lo, hi)`` such that ``lo <= p < hi`` (byte-wise) holds exactly for the paths ``p``
    strictly beneath ``directory`` or equal to it: ``p.startswith(directory)``."""
    if not is_directory(directory):
        raise ValueError(f"not a directory lease path: {directory!r}")
    return directory, directory[:-1] + _AFTER_SEP


def overlaps(a: str, b: str) -> bool:
    """Whether leases of ``a`` and ``b`` contend: one covers the other."""
    return covers(a, b) or covers(b, a)


# -- a `file:` glob against a directory lease -------------------------------------------------


def _glob_tokens(pattern: str) -> list[str]:
    """``pattern`` cut into fnmatch's units: ``*``, or a piece that matches one character
    (``?``, a ``[...]`` set, a literal; an unclosed ``[`` is a literal, as fnmatch has it)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "[":
            j = i + 1
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j < n:
                out.append(pattern[i:j + 1])
                i = j + 1
                continue
            out.append("[[]")
        else:
            out.append(c)
        i += 1
    return out


def _fnmatchcase(name: str, pattern: str) -> bool:
    # fnmatch (and re under it) loaded on first use: the commit guard loads this module on every
    # commit and never matches a glob.
    from fnmatch import fnmatchcase

    return fnmatchcase(name, pattern)


def glob_reaches_beneath(pattern: str, prefix: str) -> bool:
    """Whether ``pattern`` (fnmatch rules, case-sensitive) matches some path that begins with
    ``prefix``: ``src/api/*.py`` and ``src/*`` reach beneath ``src/api/``; ``src/apiary.py``
    and ``lib/*`` do not.

    A ``*`` matches any run of characters, ``/`` included, so once the glob's part before its
    first ``*`` has matched the start of ``prefix``, that ``*`` takes the rest of it and
    whatever of the glob remains can be met after it. So only that first part is compared,
    one character against one unit: the cost is the glob's length, not the path's times the
    glob's (this runs inside the write transaction of ``msg_send``, once per live lease)."""
    tokens = _glob_tokens(pattern)
    star = tokens.index("*") if "*" in tokens else len(tokens)
    if len(prefix) > star and star == len(tokens):
        return False  # no `*`: the glob matches paths of its own length only
    return all(_fnmatchcase(ch, token) for ch, token in zip(prefix, tokens[:star]))


def glob_reaches(pattern: str, lease: str, holder_cwd: str) -> bool:
    """Whether a ``file:<glob>`` selector reaches the holder of ``lease``. A file lease: the
    glob matches its absolute path, its path relative to the holder's cwd, or its base name.
    A directory lease: the glob matches the directory itself in those three forms (with or
    without the trailing ``/``), or some path beneath it in absolute or holder-relative form
    (``file:src/api/x.py`` reaches the holder of ``src/api/``; a bare base name such as
    ``x.py`` names no directory, so it reaches only a holder whose cwd the lease covers)."""
    if not is_directory(lease):
        forms = [lease, os.path.relpath(lease, holder_cwd), os.path.basename(lease)]
        return any(_fnmatchcase(form, pattern) for form in forms)
    bare = lease.rstrip(SEP) or SEP
    rel = os.path.relpath(bare, holder_cwd)
    forms = [bare, rel, os.path.basename(bare)]
    if any(_fnmatchcase(f, pattern) or _fnmatchcase(as_directory(f), pattern) for f in forms):
        return True
    beneath = [lease, "" if rel == "." else as_directory(rel)]
    return any(glob_reaches_beneath(pattern, p) for p in beneath)

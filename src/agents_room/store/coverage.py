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

"""A store that keys paths by the caller's spelling, as stores did before paths were canonical:
``abspath`` against the session's cwd, no symlink resolved, so two spellings of one file (a
symlink to a folder above the checkout) are two leases, two read baselines, two ``file:``
targets. Opened by the simulator's direct driver as ``factory(db, busy_timeout_s=...)``.

The store puts every path it keys by through one rule, ``agents_room.store.paths.canonical``
(and ``paths.glob`` for a ``file:`` glob); the mutant swaps both for the spelling as written.
Before it opens the store it proves the swap took, on a symlink of its own: a store that
resolved symlinks somewhere the mutant does not reach would make it test nothing, so that
fails to build instead.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from agents_room.store import Store, bounds

from .mutation import MutationError, rebind

# The store's canonical-path rules the mutant replaces (agents_room/store/paths.py).
RULES = ("canonical", "glob")


def as_spelled(path: str, *_how: object) -> str:
    """The spelling as the caller wrote it (already made absolute by the store), whatever
    else the rule is told (e.g. a folder already known canonical)."""
    return path


def respell() -> None:
    """Every canonical-path rule of the store replaced by :func:`as_spelled`, wherever it was
    imported; then proved on a real symlink."""
    from agents_room.store import paths

    for name in RULES:
        shipped = getattr(paths, name, None)
        if shipped is None:
            raise MutationError(f"agents_room.store.paths.{name} is gone: the mutant no longer knows the store's rule")
        if shipped is not as_spelled:
            setattr(paths, name, as_spelled)
            rebind(shipped, as_spelled)
    with tempfile.TemporaryDirectory() as d:
        real = os.path.join(os.path.realpath(d), "real")
        os.mkdir(real)
        os.symlink(real, os.path.join(d, "link"))
        spelled = os.path.join(d, "link", "x.py")
        if bounds.path(spelled, "/") != os.path.abspath(spelled):
            raise MutationError(f"bounds.path still resolves {spelled} to {bounds.path(spelled, '/')}: the store "
                                "canonicalises somewhere the mutant does not reach")


def spelling_keyed(db: str, busy_timeout_s: float) -> Any:
    """The shipped store with paths keyed by spelling, as stores were before paths were
    canonical: no symlink resolved and no device and inode recorded or looked up (either alone
    is now mostly covered by the other: a file's two spellings share its inode and its name in
    its folder, and a directory claim meets the leases beneath it by identity)."""
    respell()
    return identity_blind(db, busy_timeout_s)


# -- the kernel's rule inside a repository (issue: `..` after a symlink, a symlinked folder) ---------------


def _text_absolute(path: str, cwd: str = "") -> str:
    """``path`` made absolute with every ``..`` collapsed as text (``abspath``), as stores did
    before ``..`` was the kernel's: ``<repo>/via/../x.py`` keys ``<repo>/x.py``."""
    return os.path.abspath(os.path.join(cwd or os.getcwd(), path))


def dotdot_as_text(db: str, busy_timeout_s: float) -> Any:
    """The shipped store with ``..`` collapsed as text before paths are resolved (the one
    rule that keeps it, ``paths.absolute``, swapped for ``abspath``); proved on a real
    symlink before the store opens."""
    from agents_room.store import paths

    shipped = paths.absolute
    if shipped is not _text_absolute:
        paths.absolute = _text_absolute
        rebind(shipped, _text_absolute)
    with tempfile.TemporaryDirectory() as d:
        top = os.path.realpath(d)
        os.makedirs(os.path.join(top, "src", "pkg"))
        os.symlink(os.path.join("src", "pkg"), os.path.join(top, "via"))
        if bounds.path("via/../x.py", top) != os.path.join(top, "x.py"):
            raise MutationError(f"bounds.path still applies .. as the kernel does ({bounds.path('via/../x.py', top)}): "
                                "the store keeps .. somewhere the mutant does not reach")
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def beneath_unresolved(db: str, busy_timeout_s: float) -> Any:
    """The shipped store that looks nothing up beneath a canonical cwd (``paths._beneath``, the
    fast path for a session's own paths, returns the path as written): a symlinked folder
    inside the repository (``alias -> src``) is another folder to it, and (as a store before
    paths were canonical) nothing is recorded or looked up by device and inode: with the
    identity lookups, which meet a file's, a folder's and the leases beneath a directory's other
    names, the spelling alone shows in ``lease_check``'s answers now and then, no more."""
    from agents_room.store import paths

    def as_written(real: str, path: str) -> str:
        return path

    if paths._beneath.__name__ != "as_written":
        paths._beneath = as_written
    with tempfile.TemporaryDirectory() as d:
        top = os.path.realpath(d)
        os.mkdir(os.path.join(top, "src"))
        os.symlink("src", os.path.join(top, "alias"))
        paths.found_canonical(top)
        if bounds.path("alias/x.py", top) != os.path.join(top, "alias", "x.py"):
            raise MutationError("bounds.path still resolves a symlinked folder beneath a canonical cwd")
    return identity_blind(db, busy_timeout_s)


def file_slash_granted(db: str, busy_timeout_s: float) -> Any:
    """The shipped store that takes ``x.py/`` on an existing regular file for a folder, as
    stores did before the kernel's ``ENOTDIR`` was the rule: ``bounds._not_a_file``, the one
    check of it, lets every path through, so the claim is granted as a directory lease that
    contends with no lease of ``x.py``; proved on a real file before the store opens."""
    def any_folder(value: str, where: str) -> str:
        return where

    shipped = bounds._not_a_file
    if shipped is not any_folder and shipped.__name__ != "any_folder":
        bounds._not_a_file = any_folder
        rebind(shipped, any_folder)
    with tempfile.TemporaryDirectory() as d:
        top = os.path.realpath(d)
        with open(os.path.join(top, "x.py"), "w"):
            pass
        if bounds.lease_path("x.py/", top) != os.path.join(top, "x.py/"):
            raise MutationError("bounds.lease_path still refuses x.py/ on a file: the store checks it somewhere "
                                "the mutant does not reach")
    return Store.open(db, busy_timeout_s=busy_timeout_s)


# -- a folder renamed under live leases, a symlink left in its place ([[repos]] move_src_at_s) -------------


def identity_blind(db: str, busy_timeout_s: float) -> Any:
    """The shipped store that records and looks up no identity (``paths.identities``, device
    and inode of a path and its folders, answers nothing): a lease is found by its path alone,
    so once ``src/`` is renamed under live leases (a symlink left in its place), a claim by the
    name the file has now is granted beside the holder's lease under the old one; proved on a
    real file before the store opens."""
    from agents_room.store import paths

    def nothing(path: str, top: str = "", *, own: bool = False) -> list[str]:
        return []

    shipped = paths.identities
    if shipped.__name__ != "nothing":
        paths.identities = nothing
        rebind(shipped, nothing)
    with tempfile.TemporaryDirectory() as d:
        if paths.identities(os.path.realpath(d)) or paths.identifier()(os.path.join(os.path.realpath(d), "x.py")):
            raise MutationError("paths.identities still answers: the store identifies files somewhere the mutant "
                                "does not reach")
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def _without(module: Any, name: str, broken: Any) -> None:
    """``module.name`` replaced by ``broken`` wherever it was imported (once)."""
    shipped = getattr(module, name, None)
    if shipped is None:
        raise MutationError(f"{module.__name__}.{name} is gone: the mutant no longer knows the store's rule")
    if getattr(shipped, "__name__", "") != broken.__name__:
        setattr(module, name, broken)
        rebind(shipped, broken)


def rename_second_row(db: str, busy_timeout_s: float) -> Any:
    """The shipped store whose holder, claiming its file by the name it has after a folder above
    was renamed, is not taken to hold it (``leases._own_elsewhere`` finds nothing): a second row
    of one file for one session, beside its lease under the old name."""
    from agents_room.store import leases

    def own_nowhere(tx: Any, session: Any, path: str, idents: tuple[str, ...]) -> None:
        return None

    _without(leases, "_own_elsewhere", own_nowhere)
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def name_unrecorded(db: str, busy_timeout_s: float) -> Any:
    """The shipped store of schema 5: a lease records its file's inode alone, never its name in its
    folder (``paths.recorded`` answers no name, so the name_ident column stays empty and no lookup
    of it finds a lease): once the holder's edit saved its file by rename, its lease is found by
    its path alone, and after ``src/`` is renamed (a symlink left) a claim by the file's new name is
    granted beside it; proved on a real file before the store opens."""
    from agents_room.store import paths

    def inode_only(idents: Any) -> tuple[str | None, None]:
        return (idents[0] if idents else None), None

    _without(paths, "recorded", inode_only)
    with tempfile.TemporaryDirectory() as d:
        real = os.path.join(os.path.realpath(d), "x.py")
        open(real, "w").close()  # noqa: SIM115 (an empty file: its name in its folder exists)
        if paths.recorded(paths.identities(real))[1] is not None:
            raise MutationError("paths.recorded still names the file in its folder: the store records it somewhere "
                                "the mutant does not reach")
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def renamed_beneath_unseen(db: str, busy_timeout_s: float) -> Any:
    """The shipped store whose directory claims and checks see beneath them by path alone
    (``leases.beneath_elsewhere`` finds nothing): ``src.moved/`` is granted over the leases
    taken beneath it as ``src/`` before the rename."""
    from agents_room.store import leases

    def beneath_nothing(tx: Any, directory: str, columns: str = "") -> list:
        return []

    _without(leases, "beneath_elsewhere", beneath_nothing)
    return Store.open(db, busy_timeout_s=busy_timeout_s)


def file_target_as_stored(db: str, busy_timeout_s: float) -> Any:
    """The shipped store whose ``file:`` targets match leases by their stored paths alone
    (``messages.file_reaches`` is store/coverage.py's glob_reaches): a target by a folder's new
    name misses holders under its old, and ``src/x.py`` the holders of ``src.moved/x.py``."""
    from agents_room.store import coverage, messages

    def as_stored(pattern: str, path: str, cwd: str, now: Any) -> bool:
        return coverage.glob_reaches(pattern, path, cwd)

    _without(messages, "file_reaches", as_stored)
    return Store.open(db, busy_timeout_s=busy_timeout_s)


# -- a folder bind-mounted at a second place ([[repos]] bind_mounts) -------------------------------------


def mount_blind(db: str, busy_timeout_s: float) -> Any:
    """The shipped store blind to a second mount of a folder wherever it looks by device and
    inode beyond a lease's own identity: directory claims and checks see leases beneath them
    under another name by resolved path alone (``leases.beneath_by_identity`` finds nothing),
    a literal ``file:`` target reaches holders by name alone (``messages.file_reaches`` without
    its identities), and a drift check reads the lease events of its file's own name alone
    (``reads._granted_under_another_name`` finds nothing). Realpath cannot see a bind mount, so
    ``bound/<repo>/src/`` is granted over leases of ``repos/<repo>/src/x.py``, the same files; a
    leased file's own lease still meets a claim by the other name (its recorded identity).
    Proved on a real folder before the store opens."""
    from agents_room.store import leases, messages, paths, reads

    def beneath_by_name(directory: list[str], folder: str) -> bool:
        return False

    def granted_by_name(*_args: Any) -> None:
        return None

    _without(leases, "beneath_by_identity", beneath_by_name)
    _without(reads, "_granted_under_another_name", granted_by_name)
    shipped = messages.file_reaches
    if shipped.__name__ != "reaches_by_name":
        def reaches_by_name(pattern: str, path: str, cwd: str, now: Any, identify: Any = None) -> bool:
            return shipped(pattern, path, cwd, now)

        messages.file_reaches = reaches_by_name
        rebind(shipped, reaches_by_name)
    with tempfile.TemporaryDirectory() as d:
        top = os.path.realpath(d)
        os.mkdir(os.path.join(top, "src"))
        if leases.beneath_by_identity(paths.identities(top + "/", own=True), top + "/src/") or \
                messages.file_reaches(f"{top}/src", f"{top}/src", "", paths.current(), paths.identifier()) is not True:
            raise MutationError("the store still looks beneath a directory by identity somewhere the mutant does "
                                "not reach, or file_reaches no longer answers by name")
    return Store.open(db, busy_timeout_s=busy_timeout_s)

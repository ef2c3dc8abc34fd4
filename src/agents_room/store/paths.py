"""One canonical path per file: the form every path-keyed rule stores and compares.

A checkout reached by two spellings (``~/work -> /mnt/data/work``, a symlinked folder inside a
repository, a harness that hands its model its logical working directory) is one set of
files, so leases, read baselines, ``file:`` selectors, the repo room and the commit guard all
key by :func:`canonical`: the real path of the longest prefix that exists (every symlink in it
resolved), the rest as written. A claim of a file not created yet under a symlinked folder
lands on the real folder; two clones or two git worktrees stay two sets of files.

``..`` is the kernel's: it names the folder above the *resolved* one, so ``<repo>/link/../x.py``
with ``link -> /elsewhere/dir`` is ``/elsewhere/x.py``, never ``<repo>/x.py``. Nothing here or
in a caller collapses ``link/..`` as text: a path is made absolute by :func:`absolute` (which
keeps every ``..``) and resolved by :func:`canonical`, the one place that reads it.

The rule stops at names: two hard links to one inode are two paths, and on a case-insensitive
file system ``X.py`` and ``x.py`` stay two spellings (docs/decisions.md, "One canonical path
per file").
"""

from __future__ import annotations

import os
import stat

SEP = "/"
_MAGIC = frozenset("*?[")
# Linux's descriptor that only names a file (never opened for reading: no FIFO waits, no
# permission to read needed), whose /proc/self/fd link is the file's real path.
_O_PATH = getattr(os, "O_PATH", None) if os.path.isdir("/proc/self/fd") else None
_DELETED = " (deleted)"  # how /proc/self/fd names a descriptor's file once it is unlinked
# Folders this process found canonical or not (found_canonical), bounded: a store serving many
# sessions (an HTTP server) sees as many cwds.
_FOUND: dict[str, bool] = {}
_FOUND_MAX = 4096


_VIEW: list[str] = []  # this process's view(), read once


def view() -> str:
    """Where this process's paths are read: ``<kernel boot id>/<mount namespace inode>``, which a
    session records at its join ("" where /proc cannot tell). Two sessions of one view see one
    tree of names, so a lease's path can be looked at; a container's own mount of a checkout
    (another mount namespace of the same kernel) names its files by paths that lead nowhere, or
    elsewhere, here, while device and inode numbers stay the kernel's own; another kernel's
    numbers are not this one's at all (:func:`same`)."""
    if not _VIEW:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
            _VIEW.append(f"{boot}/{os.stat('/proc/self/ns/mnt').st_ino}")
        except OSError:
            _VIEW.append("")
    return _VIEW[0]


def absolute(path: str, cwd: str = "") -> str:
    """``path`` made absolute against ``cwd`` (default: this process's) as the kernel reads
    it: ``os.path.abspath``'s form (``.`` and repeated ``/`` dropped, no trailing ``/``), save
    that every ``..`` is kept for :func:`canonical` to apply to the resolved folder. A path
    without ``..`` (nearly every call) is ``abspath``'s, at its cost."""
    joined = os.path.join(cwd or os.getcwd(), path) if not path.startswith(SEP) else path
    if not has_parent(joined):
        return os.path.abspath(joined)
    kept = [part for part in joined.split(SEP) if part and part != "."]
    return SEP + SEP.join(kept)


def has_parent(path: str) -> bool:
    """Whether ``path`` has a ``..`` component (one substring test on the common path)."""
    return "/.." in path and (path.endswith("/..") or "/../" in path)


def canonical(path: str, real: str = "") -> str:
    """The canonical form of an absolute ``path`` (:func:`absolute`'s, or ``abspath``'s): its
    existing prefix resolved as ``os.path.realpath`` (non-strict) resolves it, each ``..``
    applied to the folder resolved so far, as the kernel applies it (the part that does not
    exist yet is kept as written, and a symlink loop is left as it is), with the trailing
    ``/`` of a directory lease kept. ``real``: a folder above ``path`` known to be canonical
    (:func:`found_canonical`): only the components beneath it are looked up."""
    bare = path.rstrip(SEP) or SEP
    if has_parent(bare):
        resolved = _through_parents(bare)
    elif real and bare.startswith(real.rstrip(SEP) + SEP):
        resolved = _beneath(real.rstrip(SEP), bare)
    else:
        resolved = _real(bare)
    return resolved + SEP if path.endswith(SEP) and not resolved.endswith(SEP) else resolved


def found_canonical(folder: str) -> bool:
    """Whether ``folder`` is canonical, found once per process: a session's cwd, made canonical
    at its join, is asked on each of its calls (a session joined before paths were canonical
    kept its cwd as given, until it rejoins). A folder turned into a symlink later is still
    taken as found until the process ends; a rejoin makes its cwd afresh."""
    found = _FOUND.get(folder)
    if found is None:
        if len(_FOUND) >= _FOUND_MAX:
            _FOUND.clear()
        found = _FOUND[folder] = canonical(folder) == folder
    return found


def _beneath(real: str, path: str) -> str:
    """:func:`canonical` of ``path`` beneath the canonical folder ``real``: one ``lstat`` a
    component until a name does not exist (the rest is as written) or one is a symlink (then
    the whole path is resolved)."""
    here = real
    for part in path[len(real) + 1:].split(SEP):
        here = here + SEP + part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return path
        except OSError:
            return _real(path)
        if stat.S_ISLNK(mode):
            return _real(path)
    return path


def _through_parents(path: str) -> str:
    """:func:`canonical` of a path with ``..`` in it: the kernel's own answer where the whole
    path exists (one ``O_PATH`` descriptor), else ``os.path.realpath``'s, which applies each
    ``..`` to the components it has resolved (the kernel's rule) and, past the first name that
    does not exist, to the names as written (the kernel has no answer there)."""
    if _O_PATH is not None:
        try:
            fd = os.open(path, _O_PATH)
        except OSError:
            return os.path.realpath(path)
        try:
            return _named_by(fd, path)  # (a file saved by rename meanwhile: its path, never "... (deleted)")
        finally:
            os.close(fd)
    return os.path.realpath(path)


def _real(path: str) -> str:
    """``os.path.realpath(path)``, in two system calls where the kernel can say it: the path
    of an ``O_PATH`` descriptor of what exists (realpath's ``lstat`` of every component costs
    about 30 us a call at seven components, on every lease call), and for a name not created
    yet, its folder's real path and the name. Anything else (no ``O_PATH`` or ``/proc``, a
    dangling symlink, a loop, a folder it may not search): ``os.path.realpath`` itself."""
    if _O_PATH is None:
        return os.path.realpath(path)
    try:
        fd = os.open(path, _O_PATH)
    except FileNotFoundError:
        head, name = os.path.split(path)
        if head == path or os.path.lexists(path):
            return os.path.realpath(path)  # a dangling symlink: realpath follows it
        return os.path.join(_real(head), name)
    except OSError:
        return os.path.realpath(path)
    try:
        return _named_by(fd, path)
    finally:
        os.close(fd)


def _named_by(fd: int, path: str) -> str:
    """The real path of ``path`` by its ``O_PATH`` descriptor ``fd``; ``os.path.realpath``
    where the kernel's name is no path (``anon_inode:[...]``) or is the name of a file removed
    since it was opened, which the kernel reports with `` (deleted)`` after it (an editor's
    save by rename does that between the two calls)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    return real if real.startswith(SEP) and not real.endswith(_DELETED) else os.path.realpath(path)


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
    head = canonical(absolute(SEP.join(parts[:literal]) or SEP))
    rest = SEP.join(parts[literal:])
    if not rest:
        return head + SEP if pattern.endswith(SEP) and not head.endswith(SEP) else head
    return head.rstrip(SEP) + SEP + rest


def literal(pattern: str) -> bool:
    """Whether a ``file:`` glob has no wildcard (``*``, ``?``, ``[``): it names one path."""
    return not _MAGIC & set(pattern)


def current():  # noqa: ANN201 (a closure: Callable[[str], str])
    """:func:`canonical` for many absolute paths of few folders, as they resolve now: a lease's
    path stored before a folder above it was renamed (a symlink left in its place) resolves to
    the folder's new name. Each folder is resolved once (the closure's life: one call of the
    store), a file's last name kept as stored; a directory's (``/`` at the end) is a folder's,
    resolved too (a lease of the very folder renamed); a path with ``..`` is resolved whole."""
    folders: dict[str, str] = {}

    def folder_now(folder: str) -> str:
        real = folders.get(folder)
        if real is None:
            if len(folders) >= _FOUND_MAX:
                folders.clear()
            real = folders[folder] = canonical(folder or SEP).rstrip(SEP)
        return real

    def now(path: str) -> str:
        if path == SEP or has_parent(path):
            return canonical(path)
        if path.endswith(SEP):
            return folder_now(path.rstrip(SEP)) + SEP
        folder, name = path.rsplit(SEP, 1)
        return folder_now(folder) + SEP + name

    return now


def identities(path: str, top: str = "", *, own: bool = False) -> list[str]:
    """What the kernel calls the file of the canonical ``path`` and the folders above it, for a
    lease that follows its file (docs/decisions.md, "One canonical path per file"): first its
    own identity, ``<device>:<inode>`` when it exists, else its deepest existing folder's with
    the rest as written (``<device>:<inode>/new/z.py``; an existing one also as such a name in
    its folder: a lease claimed before it was created), then each existing folder's above it,
    nearest first, up to ``top`` (a folder above ``path``, the caller's cwd: its own identity
    the last; default, and when ``path`` is not beneath it: up to ``/``). ``own``: the first
    alone. Two names of one file (a hard link, a bind mount, a folder renamed under a lease)
    have one identity; a lease stores its own, and a claim, a check or a commit looks for
    leases of any of these. One ``stat`` a component (1 to 3 us each): ``top`` bounds them to
    the components beneath the cwd, the fast path."""
    bare = path.rstrip(SEP) or SEP
    folder = SEP if path.endswith(SEP) and bare != SEP else ""  # a directory lease's name: never a file's
    top = top.rstrip(SEP)
    stop = top if top and bare.startswith(top + SEP) else SEP
    out: list[str] = []
    here, tail = bare, ""
    while True:
        try:
            st = os.stat(here)
        except OSError:
            st = None
        if st is None and here != SEP:
            head, name = here.rsplit(SEP, 1)
            tail = name + SEP + tail if tail else name
            here = head or SEP
            continue
        if st is not None:
            ident = f"{st.st_dev}:{st.st_ino}"
            if not out and tail:
                out.append(ident + SEP + tail + folder)
                if own:
                    return out
            out.append(ident)
            if own:
                return out
        if here == SEP or here == stop:
            if not tail and len(out) > 1:  # it exists: as a name in its folder too (a lease taken before it did)
                out.insert(1, out[1] + SEP + bare.rsplit(SEP, 1)[1] + folder)
            return out
        here = here.rsplit(SEP, 1)[0] or SEP


def recorded(idents: list[str] | tuple[str, ...]) -> tuple[str | None, str | None]:
    """What a lease records of its file, from :func:`identities` of its path: its own identity
    (the first) and, for a file or directory that exists, its name in its folder too (the
    second, ``<folder device:inode>/<name>``; None for a name not created yet, whose own
    identity is already that form). Every editor saves a file by rename (a new inode): the
    inode then names no file, while the name in its folder, whose inode a rename of the folder
    keeps, still leads to it. A lookup matches either against a caller's identities."""
    if not idents:
        return None, None
    own = idents[0]
    return own, idents[1] if SEP not in own and len(idents) > 1 and SEP in idents[1] else None


def same(holder: str, ident: str, path: str, name: str | None = None, seen_from: str | None = None) -> bool:
    """Whether the lease of ``holder``, recorded with identity ``ident`` (and ``name``, its
    name in its folder: :func:`recorded`) and found among the identities of ``path`` that a
    caller took a moment ago, is of ``path``'s file (or of a folder above it) *now*: what a
    match by identity must pass before it counts (by either of the two recorded forms).

    Both names are looked at together, the holder's pinned first: an ``O_PATH`` descriptor of
    what the recorded identity names (the file, or for ``<folder dev:ino>/<rest>`` the folder as
    many components above the holder's path as ``rest`` has, ``rest`` being that path's tail)
    keeps that inode from being freed and given to another file while ``path``'s identities are
    taken again. Without it, two files saved by rename in turn pass one inode back and forth
    (the kernel hands a freed inode out again at once), and a lease of one would be taken, for
    a few milliseconds, for a lease of the other: a claim denied naming a holder that was never
    in its way.

    ``seen_from``: the holder session's :func:`view`. Another kernel's: no match by identity
    (its numbers are not this kernel's). Another mount namespace of this kernel (a container's
    own mount of the checkout): the holder's path cannot be looked at from here, so a recorded
    name in its folder among ``path``'s identities counts as it stands (a folder keeps its inode
    while it lives: only a folder deleted and its inode given to another, holding a file of
    the same name, within the lease's life, would be taken for it); its bare inode does not (a
    file saved by rename frees its inode at once). Unknown (a session joined before schema 6,
    or /proc not telling): as this view."""
    forms = [recorded_as for recorded_as in (ident, name) if recorded_as]
    here = view()
    if seen_from and here and seen_from != here:
        if seen_from.split(SEP, 1)[0] != here.split(SEP, 1)[0]:
            return False
        if any(_same(holder, recorded_as, path) for recorded_as in forms):
            return True
        named = [recorded_as for recorded_as in forms if SEP in recorded_as]
        return bool(named) and any(recorded_as in identities(path) for recorded_as in named)
    return any(_same(holder, recorded_as, path) for recorded_as in forms)


def _same(holder: str, ident: str, path: str) -> bool:
    bare = holder.rstrip(SEP) or SEP
    here, tail = bare, ident.split(SEP, 1)[1] if SEP in ident else ""
    if tail:  # a name in a folder: the folder it names is pinned, the rest must be the holder's own
        depth = tail.rstrip(SEP).count(SEP) + 1
        parts = bare.rsplit(SEP, depth)
        folder = SEP if holder.endswith(SEP) and bare != SEP else ""
        if len(parts) != depth + 1 or SEP.join(parts[1:]) + folder != tail:
            return False
        here = parts[0] or SEP
    try:
        fd = os.open(here, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        now = f"{st.st_dev}:{st.st_ino}" + (SEP + tail if tail else "")
        return now == ident and ident in identities(path)
    finally:
        os.close(fd)


def is_file(path: str) -> bool:
    """Whether ``path`` (canonical; a trailing ``/`` ignored) names an existing file that is
    not a directory: ``x.py/`` is no folder to the kernel (``ENOTDIR``). A glob is none."""
    if _MAGIC & set(path):
        return False
    try:
        return not stat.S_ISDIR(os.stat(path.rstrip(SEP) or SEP).st_mode)
    except OSError:
        return False


def identifier(top: str = ""):  # noqa: ANN201 (a closure: Callable[[str], list[str]])
    """:func:`identities` for many paths of few folders (a commit's staged paths): each folder's
    chain is looked up once, each path's own identity with one ``stat``. The same identities,
    save that a folder's own name in its folder is offered too (no lease's but a directory's)."""
    folders: dict[str, list[str]] = {}
    known: dict[str, list[str]] = {}  # each path's answer, for the closure's life (a send asks one target per lease)

    def identify(path: str) -> list[str]:
        found = known.get(path)
        if found is None:
            found = known[path] = _identify(path)
        return found

    def _identify(path: str) -> list[str]:
        folder, name = path.rsplit(SEP, 1)
        above = folders.get(folder)
        if above is None:
            above = folders[folder] = identities(folder + SEP if folder else SEP, top)
        own = identities(path, own=True)
        if not own or SEP in own[0] or not above or SEP in above[0]:
            return own + above  # not created yet, or its folder not: as identities() words it
        return [own[0], above[0] + SEP + name, *above]

    return identify

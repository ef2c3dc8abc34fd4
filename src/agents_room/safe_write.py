"""Every write of a person's or a project's file (``agents-room install``, ``guard install``)
goes through :func:`write_file`, because a repository is content someone else chose.

A fixed temporary name beside the target, opened the ordinary way, follows a symbolic link a
repository commits under that name: a ``.claude/.settings.local.json.agents-room.tmp`` that
links to ``~/.claude/settings.json`` had the person's global settings replaced by the
project's, hooks included. So the temporary file gets a random name and is created
exclusively without following a link (``O_CREAT|O_EXCL|O_NOFOLLOW``, relative to an open
descriptor of the folder), then renamed over the target in that same folder: the harness
reads the old file or the new one, never half of one.

The target itself, or a folder on its way, may be a link (dotfiles kept in a repository of
their own are): the write goes where the link leads, as an editor's would, as long as that is
inside the folder the write belongs to (the project for a project's file, the home folder for
a person's). A link that leads out of it is refused with one line naming the link and where
it leads, unless the person asks for it (``--follow-links``): a project must not write the
person's own settings by committing ``.claude`` as a link to ``~/.claude``.
"""

from __future__ import annotations

import os


class UnsafeWrite(Exception):
    """The target leads out of the folder it belongs to; nothing was written."""


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _link_on_the_way(path: str, stop: str) -> str:
    """The first link on ``path``'s way (the path itself included) below ``stop``, for the
    refusal's words; ``path`` when none is found (a link swapped meanwhile)."""
    parts = os.path.relpath(path, stop).split(os.sep) if _inside(path, stop) else path.split(os.sep)
    here = stop if _inside(path, stop) else os.sep
    for part in parts:
        here = os.path.join(here, part)
        if os.path.islink(here):
            return here
    return path


def destination(path: str | os.PathLike[str], within: str | os.PathLike[str], *, follow_links: bool = False) -> str:
    """Where a write of ``path`` lands (every link resolved), checked to be inside ``within``
    (resolved too) unless ``follow_links``; :class:`UnsafeWrite` otherwise."""
    given = os.path.abspath(os.fspath(path))
    real, base = os.path.realpath(given), os.path.realpath(os.fspath(within))
    if not follow_links and not _inside(real, base):
        link = _link_on_the_way(given, os.path.abspath(os.fspath(within)))
        raise UnsafeWrite(f"{given}: not written: the symbolic link {link} leads to {real}, outside {base}; "
                          "remove the link, or pass --follow-links to write there")
    return real


def own_folder(path: str | os.PathLike[str]) -> str:
    """``path`` as a folder this user alone may write in: made (mode 700) where it is absent,
    refused (:class:`UnsafeWrite`, one line naming it) where it is a link, no folder, another
    user's, or writable by others. For a folder of a shared temporary directory, which anyone
    may make first: a folder another user made would let them plant or remove the markers kept
    in it (the wake waiters', the edit guard's first word)."""
    path = os.fspath(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path):
        raise UnsafeWrite(f"{path} is not a folder (a link or a file was there first): remove it")
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise UnsafeWrite(f"{path} belongs to user {st.st_uid} or others may write in it "
                          f"(mode {st.st_mode & 0o777:o}): remove it, it is not this user's")
    return path


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_file(path: str | os.PathLike[str], text: str, *, within: str | os.PathLike[str],
               mode: int | None = None, follow_links: bool = False) -> str:
    """Write ``text`` to ``path`` atomically and return where it landed. ``mode``: the new
    file's permission bits (default: the existing file's, else what the umask allows a new
    file). Missing folders are created (below the resolved target, so inside ``within``).
    :class:`UnsafeWrite` for a link leading out of ``within``; OSError named by ``path``."""
    given = os.path.abspath(os.fspath(path))
    real = destination(given, within, follow_links=follow_links)
    folder, name = os.path.split(real)
    try:
        os.makedirs(folder, exist_ok=True)
        if mode is None:
            try:
                mode = os.stat(real).st_mode & 0o7777
            except FileNotFoundError:
                mode = _default_mode()
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, exc.filename or given) from None
    try:
        tmp = f".{name}.{os.urandom(8).hex()}.tmp"  # os.urandom: the hook path imports this module
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, given) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fchmod(f.fileno(), mode)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise OSError(exc.errno, exc.strerror, given) from None
            raise
    finally:
        os.close(dir_fd)
    return real

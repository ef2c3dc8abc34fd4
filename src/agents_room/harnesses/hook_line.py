"""The shell lines ``agents-room install`` writes for our hooks, and the launcher a committed
project file reaches this machine's installation through.

A harness runs a hook command through its shell (Claude Code ``/bin/sh -c``, Codex ``$SHELL
-lc``, Gemini CLI ``bash -c``) on every event it hooks, a tool call among them, so what the
line starts is the hook's cost. Two forms and a test that goes before either, each a POSIX
``sh`` line that ends in the command with its arguments still open, so a harness module
appends flags to it (``{line} --format cursor``) as to a plain command:

- :func:`local`: this installation's interpreter, without ``site``, on its hook entry
  (agents_room/hook_entry.py): absolute paths, for a file that stays on this machine.
- :func:`portable`: for a file a team commits (Gemini CLI's and Cursor's project settings). It
  names no path of this machine: it runs the launcher every install writes to this user's
  ``~/.agents-room/hook`` (:func:`launcher_text`: the same lean start), else ``agents-room
  hook`` from PATH, and where neither is there it exits 0 and says nothing: a teammate
  without agents-room opens the project and their harness works as before.
- either, with ``quiet=True``: first a test that exits at once, without starting Python, when
  this agent's own ``agents-room serve`` says there is nothing for the hook to do
  (:data:`QUIET_GATE`, kept by :mod:`.quiet`). For the events that come with every tool call
  and prompt; an event that must answer (SessionStart, the end of a turn, the waiter, an edit
  guard) is written without it.

``store``: the ``AGENTS_ROOM_DB`` install names, exported first (a harness gives its hooks
its own environment, not the server entry's ``env``).
"""

from __future__ import annotations

import os
import shlex
import sys

# The launcher a committed project file runs, under the home folder (an install writes it; it
# holds this machine's paths).
LAUNCHER = ".agents-room/hook"

# The quiet path, in the harness's shell: the store's folder as the store reads
# ``$AGENTS_ROOM_DB`` (unset or empty: the default file; ``~/``: under $HOME; an absolute
# path; anything else, such as a URL, has no marker: on to Python), and in it
# ``quiet/<the harness's pid>`` (the shell's parent is the harness, as the server's is). The
# marker holds the serving process's pid, the raw ``$AGENTS_ROOM_DB`` it serves and its host
# id (store/hosts.py: ``$AGENTS_ROOM_HOST_ID``, else the machine id); the hook exits only when
# that process lives, its store is this hook's and its host is this hook's (hosts that share
# a kernel and the store's folder but not a PID namespace may share a harness pid). Builtins
# only: no process is started. :mod:`.quiet` writes the marker and says why it never hides
# news.
QUIET_GATE = (
    'd="${AGENTS_ROOM_DB-}"; case "$d" in "") d="$HOME/.agents-room/room.db";; "~/"*) d="$HOME/${d#??}";; '
    '/*) ;; *) d=;; esac; '
    'if [ -n "$d" ] && { read -r p && read -r s && read -r h; } 2>/dev/null <"${d%/*}/quiet/$PPID" '
    '&& [ "$s" = "${AGENTS_ROOM_DB-}" ] && [ -n "$p" ] && [ -d "/proc/$p" ] '
    '&& { m="${AGENTS_ROOM_HOST_ID-}"; [ -n "$m" ] || read -r m 2>/dev/null </etc/machine-id; [ "$h" = "$m" ]; }; '
    'then exit 0; fi; '
)

# A committed file's hook: the launcher, else agents-room on PATH, else nothing at all.
PORTABLE = (
    f'if [ -f "$HOME/{LAUNCHER}" ]; then set -- sh "$HOME/{LAUNCHER}"; '
    'elif command -v agents-room >/dev/null 2>&1; then set -- agents-room hook; else exit 0; fi; exec "$@"'
)


def entry() -> str:
    """This installation's hook entry (agents_room/hook_entry.py), the path earlier installs
    wrote into users' settings."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hook_entry.py")


def lean() -> str:
    """This installation's interpreter, without ``site``, on its hook entry
    (agents_room/hook_entry.py says why): a plain command line."""
    return f"{shlex.quote(sys.executable)} -I -S {shlex.quote(entry())}"


def _prefix(store: str | None, quiet: bool) -> str:
    out = f"export AGENTS_ROOM_DB={shlex.quote(store)}; " if store is not None else ""
    return out + (QUIET_GATE if quiet else "")


def local(command: str | None = None, *, store: str | None = None, quiet: bool = False) -> str:
    """The hook line for a file on this machine: ``command`` (default :func:`lean`, a plain
    command line), its last word open for flags."""
    command = command or lean()
    prefix = _prefix(store, quiet)
    return f"{prefix}exec {command}" if prefix else command


def portable(*, store: str | None = None, quiet: bool = False) -> str:
    """The hook line for a file a team commits: no path of this machine (:data:`PORTABLE`)."""
    return _prefix(store, quiet) + PORTABLE


def line(command: str | None, *, committed: bool, store: str | None = None, quiet: bool = False) -> str:
    """:func:`portable` for a file a team commits, else :func:`local` of ``command``: the one
    call a harness module makes for each hook it writes."""
    return portable(store=store, quiet=quiet) if committed else local(command, store=store, quiet=quiet)


def launcher_text() -> str:
    """``~/.agents-room/hook``: what :data:`PORTABLE` runs on this machine. This installation's
    lean start while it is there; else ``agents-room hook`` on PATH; else nothing (exit 0)."""
    python, hook = shlex.quote(sys.executable), shlex.quote(entry())
    return (
        "#!/bin/sh\n"
        "# agents-room's hook, as project files a team commits run it (`agents-room install` writes this\n"
        "# file with this machine's installation; any install run again rewrites it).\n"
        f"if [ -x {python} ] && [ -f {hook} ]; then exec {python} -I -S {hook} \"$@\"; fi\n"
        "if command -v agents-room >/dev/null 2>&1; then exec agents-room hook \"$@\"; fi\n"
        "exit 0\n"
    )

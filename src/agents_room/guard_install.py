"""``agents-room guard install|uninstall``: put the commit guard (agents_room/guard.py) in a
repository's pre-commit hook, or take it out.

The hook goes where git looks for hooks: ``core.hooksPath`` when set, else the repository's
hooks folder (``git rev-parse --git-path hooks`` says which). A pre-commit hook already there
is kept, renamed ``pre-commit.agents-room-chained``, and run first by ours with the same
arguments (a hook that refuses still refuses); ``uninstall`` puts it back. Installing twice
rewrites our hook only (this installation's interpreter may have moved).

Beside it, the same way, a ``reference-transaction`` hook (guard_refs.py): the branch moves
that run no pre-commit hook (merge, cherry-pick, rebase, revert, am, commit-tree + update-ref,
``commit --no-verify``) are checked when git updates the branch.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .parser import not_empty

HOOK = "pre-commit"
CHAINED = ".agents-room-chained"  # beside our hook, the one that was there before it (run first)
REFS_HOOK = "reference-transaction"
MARK = "# agents-room guard:"


class GuardInstallError(Exception):
    """Install or uninstall cannot go ahead; nothing was changed."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "guard", help="install or remove the git pre-commit guard that honours exclusive leases",
        description="install: write a git pre-commit hook that refuses a commit of paths (added, modified, deleted, "
        "renamed) covered by another session's live exclusive lease, naming the path, the holder and when the lease "
        "ends, and a reference-transaction hook that refuses a branch update (merge, cherry-pick, rebase, revert, "
        "am, update-ref, commit --no-verify) whose new commits change such a path. It honours core.hooksPath and "
        "runs a hook that was there first. uninstall: remove them and put back what was there. At commit time, "
        "AGENTS_ROOM_GUARD=warn only reports, =off skips; git commit --no-verify skips the pre-commit hook only. The store is --db (written into the hook) or $AGENTS_ROOM_DB at "
        "install time, else the commit's $AGENTS_ROOM_DB, else the default.",
    )
    p.add_argument("action", choices=["install", "uninstall"])
    p.add_argument("--repo", metavar="PATH", type=not_empty, help="the repository (default: the current folder)")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from .safe_write import UnsafeWrite

    try:
        store = _store(args) if args.action == "install" else None  # a bad location is refused first
        hooks = hooks_folder(args.repo or os.getcwd())
        if args.action == "install":
            print(install(hooks, store))
            print(install_refs(hooks, store))
        else:
            print(uninstall(hooks))
            print(uninstall_refs(hooks))
    except (GuardInstallError, UnsafeWrite, OSError) as exc:
        text = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.filename else str(exc)
        print(f"agents-room guard {args.action}: {text}", file=sys.stderr)
        return 1
    return 0


def _store(args: argparse.Namespace) -> str | None:
    """The store to write into the hook: ``--db``, else ``$AGENTS_ROOM_DB`` (as ``install``
    writes it into a harness's files), checked now; None leaves it to the commit's
    environment."""
    given = args.db or os.environ.get("AGENTS_ROOM_DB") or None
    if given is None:
        return None
    from .store.location import resolve

    return resolve(args.db, source="--db").target if args.db else resolve().target


def hooks_folder(repo: str) -> str:
    """The folder git runs this repository's hooks from (absolute)."""
    if not os.path.isdir(repo):
        raise GuardInstallError(f"--repo: {repo!r} is not a folder")
    top = _git(repo, "rev-parse", "--show-toplevel")
    found = _git(top, "rev-parse", "--git-path", "hooks")
    return os.path.normpath(os.path.join(top, found))  # relative: to the top, where git runs hooks


def _git(cwd: str, *args: str) -> str:
    import subprocess  # here: the CLI's import stays cheap for the commands hooks run

    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GuardInstallError(f"cannot run git: {exc.strerror or exc}") from None
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise GuardInstallError(f"{cwd} is not in a git work tree ({why})")
    return done.stdout.rstrip("\n")


def script(store: str | None) -> str:
    """The hook: the chained hook first (as git would run it: only when executable), then the
    guard, with this installation's interpreter on its entry (guard_entry.py); when that
    installation is gone, one line and the commit goes ahead."""
    from .shell_line import line, say, word

    python = word(sys.executable)
    entry = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_entry.py")
    run = line(sys.executable, "-I", "-S", entry, *(["--db", store] if store else []))
    return (
        "#!/bin/sh\n"
        f"{MARK} refuses a commit of paths another session leased exclusively.\n"
        "# Written by `agents-room guard install`; `agents-room guard uninstall` puts back what was here.\n"
        f'chained="$0.agents-room-chained"\n'
        'if [ -x "$chained" ]; then "$chained" "$@" || exit $?; fi\n'
        f"if [ -x {python} ] && [ -f {word(entry)} ]; then exec {run}; fi\n"
        + say(f"agents-room guard: {sys.executable} or its agents_room is gone; commit allowed "
              "(agents-room guard uninstall removes this hook)") + "\n"
    )


def is_ours(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return MARK.encode() in f.read(4096)
    except OSError:
        return False


def install(hooks: str, store: str | None) -> str:
    """Write our pre-commit hook into ``hooks``, keeping a foreign one as the chained one."""
    return _put(hooks, HOOK, script(store))


def _put(hooks: str, name: str, text: str) -> str:
    """Write our hook ``name`` into ``hooks``, keeping a foreign one as the chained one."""
    hook, chained = os.path.join(hooks, name), os.path.join(hooks, name + CHAINED)
    present = os.path.lexists(hook)
    ours = present and is_ours(hook)
    if present and not ours and os.path.lexists(chained):
        raise GuardInstallError(f"{hook} is not agents-room's and {chained} exists already: move one of them away, "
                                "then install again")
    from .safe_write import write_file

    os.makedirs(hooks, exist_ok=True)
    if present and not ours:
        os.rename(hook, chained)  # kept whole (mode, symlink and all) for uninstall
    try:  # atomic, through an exclusive temporary file: a commit meanwhile runs the old hook or ours
        write_file(hook, text, within=hooks, mode=0o755)
    except BaseException:
        if present and not ours:
            os.rename(chained, hook)  # nothing changed
        raise
    if ours:
        return f"updated the guard in {hook}"
    kept = f"; the hook that was there runs first, from {chained}" if present else ""
    return f"installed the guard in {hook}{kept}"


def uninstall(hooks: str) -> str:
    """Remove our pre-commit hook and put back the chained one, if any. A hook that is not
    ours is left alone (GuardInstallError)."""
    return _take(hooks, HOOK, f"no guard in {hooks}; nothing changed")


def _take(hooks: str, name: str, absent: str) -> str:
    """Remove our hook ``name`` and put back the chained one, if any (``absent``: the answer
    when there is neither)."""
    hook, chained = os.path.join(hooks, name), os.path.join(hooks, name + CHAINED)
    if os.path.lexists(hook) and not is_ours(hook):
        raise GuardInstallError(f"{hook} is not agents-room's guard; left as it is")
    if not os.path.lexists(hook) and not os.path.lexists(chained):
        return absent
    if os.path.lexists(chained):
        os.replace(chained, hook)
        return f"removed the guard from {hook}; the hook that was there is back"
    os.unlink(hook)
    return f"removed the guard: {hook}"


# -- the reference-transaction hook (guard_refs.py) ---------------------------------------------------


def refs_script(store: str | None) -> str:
    """The reference-transaction hook: the chained hook first, with the transaction on its
    stdin too (git runs it at every state; it sees each); then, at ``prepared`` and only when
    a branch moves, the guard. Every other call costs this one shell."""
    from .shell_line import line, say, word

    python = word(sys.executable)
    entry = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard_refs_entry.py")
    run = line(sys.executable, "-I", "-S", entry, *(["--db", store] if store else []), "prepared")
    gone = say(f"agents-room guard: {sys.executable} or its agents_room is gone; branch update allowed "
               "(agents-room guard uninstall removes this hook)")
    return (
        "#!/bin/sh\n"
        f"{MARK} refuses a branch update whose new commits change paths another session leased exclusively.\n"
        "# Written by `agents-room guard install`; `agents-room guard uninstall` puts back what was here.\n"
        'chained="$0.agents-room-chained"\n'
        'if [ -x "$chained" ]; then\n'
        "  input=$(cat; echo .); input=${input%.}\n"
        "  printf '%s' \"$input\" | \"$chained\" \"$@\" || exit $?\n"
        '  [ "$1" = prepared ] || exit 0\n'
        "else\n"
        '  [ "$1" = prepared ] || exit 0\n'
        "  input=$(cat; echo .); input=${input%.}\n"
        "fi\n"
        'case "$input" in *" refs/heads/"*) ;; *) exit 0 ;; esac\n'
        f"if [ -x {python} ] && [ -f {word(entry)} ]; then printf '%s' \"$input\" | {run}; "
        "exit $?; fi\n"
        f"{gone}\n"
    )


def install_refs(hooks: str, store: str | None) -> str:
    """Write our reference-transaction hook into ``hooks``, keeping a foreign one as the
    chained one (as ``install`` does for pre-commit)."""
    return _put(hooks, REFS_HOOK, refs_script(store))


def uninstall_refs(hooks: str) -> str:
    """Remove our reference-transaction hook and put back the chained one, if any."""
    return _take(hooks, REFS_HOOK, f"no guard's {REFS_HOOK} hook in {hooks}; nothing changed")

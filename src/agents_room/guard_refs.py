"""The commit guard's second half: what git's ``reference-transaction`` hook, written by
``agents-room guard install`` beside the pre-commit hook, runs.

The pre-commit hook sees only ``git commit``. A branch also moves by ``git merge`` (its merge
commit runs no pre-commit hook), ``cherry-pick``, ``rebase``, ``revert``, ``am``, and by
``commit-tree`` + ``update-ref``; all of them, and ``git commit --no-verify``, update the branch
through one reference transaction, which git (2.28 and later) shows this hook before it
commits it: at state ``prepared``, ``<old> <new> <ref>`` per line on stdin, and a non-zero exit
aborts the whole transaction.

For every branch (``refs/heads/*``) the transaction moves to a commit, the paths its *new*
commits change are checked by the pre-commit guard's own rule and words (guard.py,
store/commitguard.py): the commits reachable from the new value and from no branch or
remote-tracking ref before this transaction (``git log NEW --not --branches --remotes``),
each against its first parent (a merge: what it brings in; a root commit: every file), renames
as both sides. So:

- a fast-forward to commits a branch already holds, a new branch at an existing commit, a reset
  backwards: nothing new, nothing checked (those commits were checked when their branch moved);
- a rebase is checked once, when its branch moves at the end (the commits it makes meanwhile on
  a detached ``HEAD`` are not on a branch yet);
- a deletion is never blocked, and nor is any ref outside ``refs/heads/``: fetches and pushes
  move remote-tracking refs and tags.

The hook's shell line starts Python only for ``prepared`` with a branch on stdin, so the
``committed`` state and transactions of other refs cost one ``sh``.
"""

from __future__ import annotations

import os
import sys

from . import guard

ZERO = frozenset({"0" * 40, "0" * 64})  # SHA-1 and SHA-256 repositories
BRANCHES = "refs/heads/"
NEW_COMMITS = ["git", "-c", "core.quotePath=false", "log", "--format=", "--name-only", "-z", "--no-renames",
               "--diff-merges=first-parent", "--no-ext-diff", "--no-color"]
# Not tags: a tag is a ref anyone points anywhere (``update-ref refs/tags/t NEW``, then a
# fast-forward to it would bring NEW in unchecked); a tag of a release points into a branch's history.
NOT_BEFORE = ["--not", "--branches", "--remotes"]


def main(argv: list[str] | None = None, stdin: bytes | None = None) -> int:
    """The hook: ``[--db STORE] STATE``, the transaction on stdin. Exit 1 aborts it (a path
    held by another session, or a bad ``$AGENTS_ROOM_GUARD`` or argument); 0 lets it commit.
    Its own trouble is one line on stderr, and the update goes ahead (as guard.main)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[-1] != "prepared":
        return 0 if argv and argv[-1] in ("committed", "aborted") else _bad(argv)
    mode = os.environ.get(guard.ENV, "").strip().lower() or "on"
    if mode not in guard.MODES:
        guard.say(f"{guard.ENV}={os.environ[guard.ENV][:40]!r} is not one of on, warn, off; branch update refused "
                  "until it is")
        return 1
    if mode == "off":
        return 0
    db = guard._db_flag(argv[:-1])
    if db is False:
        return _bad(argv)
    moved = branch_updates(sys.stdin.buffer.read() if stdin is None else stdin)
    if not moved:
        return 0
    try:
        top = os.getcwd()  # git runs a hook at the top of the work tree
        paths = new_paths(top, [new for _ref, new in moved])
        if not paths:
            return 0
        (engines,) = guard.store_modules("engines")
        engine, path, _origin = engines.locate(db, "--db") if db else engines.locate()
        if engine == engines.SQLITE and not os.path.exists(path):
            return 0  # no store, no leases; the pre-commit half says so once per commit
        found = guard.check(path, paths, lean=engine == engines.SQLITE)
    except guard.GuardError as exc:
        guard.say(f"{exc}; branch update allowed, nothing checked")
        return 0
    except Exception as exc:  # noqa: BLE001 (the guard's own trouble never refuses an update)
        guard.say(f"could not check the leases ({type(exc).__name__}: {exc})".splitlines()[0] + "; branch update allowed")
        return 0
    if found is None or not found[1]:
        return 0
    who, blockers = found
    for line in describe(blockers, who, top, [ref for ref, _new in moved], refused=mode == "on"):
        print(line, file=sys.stderr)
    return 1 if mode == "on" else 0


def _bad(argv: list[str]) -> int:
    guard.say(f"unexpected arguments {' '.join(argv)[:80]!r} (the reference-transaction hook takes "
              "[--db STORE] STATE); branch update refused")
    return 1


def branch_updates(text: bytes) -> list[tuple[str, str]]:
    """(branch, new value) for each ``<old> <new> <ref>`` line that moves a branch to a
    commit (deletions, to the zero id, are never checked), in order, each branch once."""
    found: dict[str, str] = {}
    for raw in text.split(b"\n"):
        parts = raw.decode("utf-8", "surrogateescape").split(" ", 2)
        if len(parts) == 3 and parts[2].startswith(BRANCHES) and parts[1] not in ZERO:
            found[parts[2]] = parts[1]
    return list(found.items())


def new_paths(top: str, news: list[str]) -> list[str]:
    """The absolute paths the new commits behind ``news`` change (see the module's words)."""
    out = guard._run([*NEW_COMMITS, *news, *NOT_BEFORE])
    base = os.fsencode(top).rstrip(b"/") + b"/"
    names = (name.strip(b"\n") for name in out.split(b"\0"))
    return list(dict.fromkeys(os.fsdecode(base + name) for name in names if name))


def describe(blockers: list, who: object, top: str, refs: list[str], *, refused: bool) -> list[str]:
    """The pre-commit guard's words (guard.describe), headed for a branch update: which
    branch, and that its new commits (not the index) change the paths."""
    lines = guard.describe(blockers, who, top, refused=refused)
    branches = ", ".join(ref[len(BRANCHES):] for ref in refs)
    paths = len({b.path for b in blockers})
    changed = f"{paths} paths its new commits change are" if paths > 1 else "a path its new commits change is"
    head = f"update of branch {branches} refused" if refused else f"warning ({guard.ENV}=warn, update of {branches} allowed)"
    lines[0] = f"agents-room guard: {head}: {changed} covered by another session's exclusive lease"
    return lines

"""The commit guard: what the pre-commit hook ``agents-room guard install`` writes runs.

It refuses a commit whose staged paths (added, modified, deleted, both sides of a rename) are
covered by a live exclusive lease of another session, naming each path, the holder's label and
session, and when the lease ends (the rule: store/commitguard.py). The committer is the
session whose harness key is in the environment (``$AGENTS_ROOM_HARNESS_KEY`` first, as the
MCP server reads it), else the one agent whose harness process is among the hook's
ancestors, and which hosts no other agent (a server started through a launcher that stays its
parent records the launcher: it is found by walking up from it). A commit from no session (a person), or from a process that hosts several
agents (nothing says which made it), is blocked by every exclusive lease, and told how to
proceed.

``$AGENTS_ROOM_GUARD``: ``on`` (the default) refuses, ``warn`` reports and lets the commit
through, ``off`` skips the check; ``git commit --no-verify`` skips this hook but not the
reference-transaction hook installed beside it (guard_refs.py). The guard never creates a
store, and never refuses a commit for its own trouble (no store, a store it cannot read, no
git): it says so in one line and allows it.

Every commit pays for it, so it starts as the mail hook does (guard_entry.py, without
``site``) and imports little: not ``subprocess`` (about as costly as the rest of the check;
git is spawned with ``os.posix_spawnp``), not the store's package (its modules are loaded
bare, as the hook's news path loads them: hook_news.py).
"""

from __future__ import annotations

import os
import sys
import time

from .harnesses.hook import _ancestors, _uuid
from .harnesses.hook import lineage as hook_lineage
from .harnesses.hook_store import store_modules
from .visible import visible

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ENV = "AGENTS_ROOM_GUARD"
MODES = ("on", "warn", "off")
# A hook reads the store while agents write it: bounded, like the mail hook's wait.
BUSY_TIMEOUT_S = 2.0
# The whole process tree up to init: git commit runs under a shell under the agent's tool
# runner under the harness, and a hook adds git and its own shell (more than the mail hook).
ANCESTOR_DEPTH = 32
# Lines of blocked paths shown; the rest are counted.
SHOWN = 20
GIT_DIFF = ["git", "diff", "--cached", "--name-status", "-z", "-M", "--no-ext-diff", "--no-color"]


class GuardError(Exception):
    """git could not be run, or failed: nothing was checked, and the commit is allowed."""


def main(argv: list[str] | None = None) -> int:
    """The hook: exit 1 refuses the commit (a covered path, or a bad ``$AGENTS_ROOM_GUARD`` or
    argument), 0 lets it through. Never raises: its own trouble (``GuardError``, the store's
    errors) is one line on stderr, and the commit goes ahead."""
    argv = sys.argv[1:] if argv is None else argv
    mode = os.environ.get(ENV, "").strip().lower() or "on"
    if mode not in MODES:
        say(f"{ENV}={os.environ[ENV][:40]!r} is not one of on, warn, off; commit refused until it is")
        return 1
    if mode == "off":
        return 0
    db = _db_flag(argv)
    if db is False:
        say(f"unexpected arguments {' '.join(argv)[:80]!r} (the hook takes --db STORE only); commit refused")
        return 1
    try:
        top = os.getcwd()  # git runs a hook at the top of the work tree
        paths = staged_paths(top)
        if not paths:
            return 0
        (engines,) = store_modules("engines")  # the store's own rule of where the store is, and its engine
        engine, path, _origin = engines.locate(db, "--db") if db else engines.locate()
        found = check(path, paths, lean=engine == engines.SQLITE)
    except GuardError as exc:
        say(f"{exc}; commit allowed, nothing checked")
        return 0
    except Exception as exc:  # noqa: BLE001 (the guard's own trouble never refuses a commit)
        say(f"could not check the leases ({type(exc).__name__}: {exc})".splitlines()[0] + "; commit allowed")
        return 0
    if found is None:
        return 0
    who, blockers = found
    if not blockers:
        return 0
    for line in describe(blockers, who, top, refused=mode == "on"):
        print(visible(line), file=sys.stderr)  # labels and paths agents chose: agents_room/visible.py
    return 1 if mode == "on" else 0


def say(line: str) -> None:
    print(f"agents-room guard: {visible(line)}", file=sys.stderr)


def _db_flag(argv: list[str]) -> str | None | bool:
    """``--db STORE`` or ``--db=STORE`` (what install writes), None without; False otherwise."""
    if not argv:
        return None
    if len(argv) == 2 and argv[0] == "--db" and argv[1]:
        return argv[1]
    if len(argv) == 1 and argv[0].startswith("--db=") and len(argv[0]) > 5:
        return argv[0][5:]
    return False


# -- the staged paths ------------------------------------------------------------------------------


def staged_paths(top: str) -> list[str]:
    """The absolute paths the commit stages: added, modified, deleted, type-changed, and both
    sides of a rename (or copy). Read NUL-separated, so spaces, newlines and bytes that are not
    UTF-8 arrive whole; such bytes are kept as ``os.fsdecode`` keeps them (surrogates)."""
    out = _run(GIT_DIFF)
    fields = out.split(b"\0")
    paths, i, base = [], 0, os.fsencode(top).rstrip(b"/") + b"/"
    while i < len(fields) and fields[i]:
        status, i = fields[i], i + 1
        count = 2 if status[:1] in (b"R", b"C") else 1
        paths += [os.fsdecode(base + name) for name in fields[i:i + count]]
        i += count
    return list(dict.fromkeys(paths))


def _run(argv: list[str]) -> bytes:
    """``argv``'s standard output (its errors go to ours), or GuardError if it fails."""
    read, write = os.pipe()
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_CLOSE, read)])
    except OSError as exc:
        os.close(read)
        os.close(write)
        raise GuardError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    os.close(write)
    chunks = []
    with os.fdopen(read, "rb") as pipe:
        while chunk := pipe.read(1 << 16):
            chunks.append(chunk)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        raise GuardError(f"{' '.join(argv[:3])} exited {code}")
    return b"".join(chunks)


# -- the store --------------------------------------------------------------------------------------


def harness_keys() -> list[str]:
    """The harness keys the commit's environment names, the most explicit first: the
    variable a person or an orchestrator sets to name the committer, then the one Claude Code
    gives everything it runs (the MCP server's order too: identity.default_harness_key)."""
    out: list[str] = []
    for name in ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID"):
        key = _uuid(os.environ.get(name))
        if key and key not in out:
            out.append(key)
    return out


def check(path: str, paths: list[str], *, lean: bool) -> tuple[Any, list[Any]] | None:
    """(who commits, the blockers) from the store at ``path`` (store/commitguard.py's
    ``Committers`` and ``Blocker``); None, after one line, when there is no store there
    (never created: nobody holds a lease)."""
    keys, pids = harness_keys(), _ancestors(ANCESTOR_DEPTH)
    top = os.getcwd()  # the work tree's top (git runs a hook there): identities are looked up beneath it
    if not lean:  # a database server: through the store itself
        if sys.flags.no_site:  # PostgreSQL's driver is in site-packages (guard_entry.py skipped site)
            import site

            site.main()
        from agents_room.store import Store
        from agents_room.store.commitguard import blockers, committers

        with Store.open(path, busy_timeout_s=BUSY_TIMEOUT_S, verify=False, create=False) as store, \
                store.db.read() as tx:
            from agents_room.store.paths import identifier, same

            who = committers(tx, keys, pids, store.host, lineage)
            return who, blockers(tx, paths, {c.session_id for c in who.mine}, identifier(top), same)
    if not os.path.exists(path):
        say(f"no store at {path}, so no leases; commit allowed")
        return None
    rule, named = store_modules("commitguard", "paths")
    # The guard only reads: the bare C connection, as the mail hook's probe reads (hook.probe),
    # without the store's writer machinery (admission queue, migrations) and its imports.
    # mode=rw: a path that is no file is never created.
    try:
        from _sqlite3 import connect
    except ImportError:
        from sqlite3 import connect
    uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"
    conn = connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("BEGIN")  # one snapshot for both lookups (WAL: a reader never waits for writers)
        tx = _Reader(conn)
        # host None: a SQLite store is one host's (WAL needs the machine's shared memory).
        who = rule.committers(tx, keys, pids, None, lineage)
        # A file no store of schema 5 has opened yet has no identities (store/paths.py) to look up,
        # nor one of schema 6 its files' names in their folders.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        identify = named.identifier(top) if version >= 5 else None
        return who, rule.blockers(tx, paths, {c.session_id for c in who.mine}, identify, named.same,
                                  by_name=version >= 6)
    finally:
        conn.close()


def lineage(pid: int) -> list[int]:
    """``pid``'s ancestors, its parent first (the store's rule asks it of each session's
    recorded process once ancestry found an agent's: store/commitguard.py); empty when it is
    gone."""
    return hook_lineage(pid, ANCESTOR_DEPTH + 1)[1:]  # [pid] alone when it is gone


class _Reader:
    """What the rule (store/commitguard.py) reads through, as through a store's ``Tx``: rows
    of a query, and the transaction's time (the store's clock is the wall clock)."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.now = conn, time.time()

    def all(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()


# -- the words ----------------------------------------------------------------------------------------


def describe(blockers: list[Any], who: Any, top: str, *, refused: bool) -> list[str]:
    """What the guard tells the committer: the blocked paths with their holders, who the
    committer is (or, from a process hosting several agents, who it could be), and how to
    proceed."""
    paths = list(dict.fromkeys(b.path for b in blockers))
    many = f"{len(paths)} staged paths are" if len(paths) > 1 else "a staged path is"
    head = "commit refused" if refused else f"warning ({ENV}=warn, commit allowed)"
    lines = [f"agents-room guard: {head}: {many} covered by another session's exclusive lease"]
    for b in blockers[:SHOWN]:
        under = "" if b.lease_path == b.path else f" (under its lease of {_shown(b.lease_path, top)})"
        who_holds = f"{b.session_id} ({b.label})" if b.label else b.session_id
        lines.append(f"  {_shown(b.path, top)}: held by session {who_holds}{under} until {_iso(b.expires_at)}")
    if len(blockers) > SHOWN:
        lines.append(f"  ... and {len(blockers) - SHOWN} more")
    if who.candidates:
        return lines + _ambiguous(who.candidates, refused=refused)
    me = ", ".join(f"{c.session_id} ({c.label})" if c.label else c.session_id for c in who.mine)
    if not refused:
        lines.append(f"  You commit as session {me}." if me else "  No agents-room session made this commit.")
    elif me:
        lines.append(f"  You commit as session {me}. To proceed: ask the holder to release it (msg_send to its "
                     "session id), wait until the lease ends, or leave those paths out of this commit.")
    else:
        lines.append("  No agents-room session made this commit (a person, or an agent that has not joined). To "
                     "proceed: ask the holder to release it (agents-room send SESSION SUBJECT), wait until the "
                     f"lease ends, leave those paths out, or go ahead anyway with: {ENV}=warn git ...")
    return lines


def _ambiguous(candidates: list[Any], *, refused: bool) -> list[str]:
    """The sessions of the several agents whose harness process runs this commit: it was
    checked as none of theirs, and the environment can name the one that made it."""
    lines = [f"  This commit runs under the harness process of {len(candidates)} agents' sessions and nothing names "
             "the one that made it, so it was checked as nobody's:"]
    for c in candidates:
        unnamed = "; it joined without a harness key, so no commit can name it" if not c.keyed else ""
        lines.append(f"    session {c.session_id} ({c.label or 'no label'}, {c.harness}{unnamed})")
    if refused:
        lines.append("  To commit as one of them, name its harness key (the one it joined with): "
                     "AGENTS_ROOM_HARNESS_KEY=<key> git commit ...; otherwise ask the holder to release it, wait "
                     "until the lease ends, or leave those paths out of this commit.")
    return lines


def _shown(path: str, top: str) -> str:
    """The path relative to the work tree when inside it; escaped when not printable (a
    newline in a name must not look like the next line)."""
    prefix = top.rstrip("/") + "/"
    rel = path[len(prefix):] or "." if path.startswith(prefix) else path
    return rel if rel.isprintable() else repr(rel)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

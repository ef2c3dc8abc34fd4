"""The edit guard: a harness hook on its file-writing tools, so two agents never write one file.

Installed (``agents-room install <harness> --edits claim|check``) as the harness's
before-tool hook on its file writers only (Claude Code ``PreToolUse`` on
Edit|Write|MultiEdit|NotebookEdit; Codex ``PreToolUse`` on apply_patch; Gemini CLI
``BeforeTool`` on write_file|replace), and, with ``--read``, as the after-tool hook of its
read tools (Claude Code ``Read``, Gemini CLI ``read_file``/``read_many_files``), where it
records the session's read baseline (``note_read``) of the file read.

For one tool call it reads the harness's payload, names every path the call would write
(a Codex patch names several: ``*** Add/Update/Delete File:`` and ``*** Move to:``), and asks
the store's one rule (store/editclaim.py) in one transaction: denied when another session's
live lease covers any of them or one drifted CRITICAL, else (``claim``) an exclusive lease of
each for this session (the common case, an edit of files the session holds, is a read-only
look first: harnesses/editlook.py). A denial answers the harness's own "deny" with the
store's reason (the model sees it as the tool's result; the file is untouched); an allowed
call prints nothing.

It fails open, by design: editing must never be blocked because agents-room is broken. A
store that cannot be opened or stays locked past :data:`BUSY_TIMEOUT_S`, a payload that is
not what the harness documents, a tool the guard does not know: the edit goes through, and
the model (as context) and the person (as the harness's system message, and on stderr) are
told once per session that the guard is not working. A path outside any git repository is
not judged (scratch files are nobody's), silently. Shell writes (``sed -i``, ``>``) are not
parsed: the commit guard stays their backstop.

Stdlib and the store only; never ``mcp`` (the hook runs on every edit).
"""

from __future__ import annotations

import os
import sys

from .editlook import BUSY_TIMEOUT_S, held_already, read_already
from .hook import _ancestors, _dumps, _keys, _loads
from .hook_store import store_modules

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HARNESSES = ("claude-code", "codex", "gemini")
EDITS = ("claim", "check", "off")
# The file-writing tools of each harness, by the name its hook payload gives, with the
# tool_input field naming the file; Codex's apply_patch carries a patch (its ``command``).
WRITERS: dict[str, dict[str, str]] = {
    "claude-code": {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
                    "NotebookEdit": "notebook_path"},
    "codex": {"apply_patch": "command"},
    "gemini": {"write_file": "file_path", "replace": "file_path"},
}
# The read tools whose reads are baselines (Codex reads through its shell: none).
READERS: dict[str, dict[str, str]] = {
    "claude-code": {"Read": "file_path"},
    "codex": {},
    "gemini": {"read_file": "file_path", "read_many_files": "include"},
}
# A patch's lines that name a file it writes (Codex's apply_patch format).
PATCH_MARKS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


class Unusable(Exception):
    """The payload is not one the guard can judge (malformed, or a tool it does not know)."""


def matcher(harness: str, *, read: bool = False) -> str:
    """The hook's matcher: the harness's writers (or, ``read``, its readers) as a regex."""
    return "|".join((READERS if read else WRITERS)[harness])


def command(harness: str, edits: str, *, read: bool = False, by_name: bool = False) -> str:
    """The installed command: this installation's interpreter without ``site``, as the news
    hook's (agents_room/hook_entry.py says why), on the guard's own entry; ``by_name``:
    ``agents-room edit-guard`` (a file a team commits names no machine's paths), which exits 0
    at once on a machine without agents-room on PATH."""
    import shlex

    flags = "--read" if read else f"--edits {edits}"
    if by_name:  # harmless where agents-room is not installed: a teammate's edits go on, unguarded
        return f"command -v agents-room >/dev/null 2>&1 || exit 0; agents-room edit-guard --harness {harness} {flags}"
    entry = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "editguard_entry.py")
    return f"{shlex.quote(sys.executable)} -I -S {shlex.quote(entry)} --harness {harness} {flags}"


# -- what a tool call writes ------------------------------------------------------------------


def written(harness: str, data: dict[str, Any]) -> list[str]:
    """Every path the tool call in ``data`` would write, as the payload spells them."""
    tool = data.get("tool_name")
    field = WRITERS[harness].get(tool) if isinstance(tool, str) else None
    if field is None:
        raise Unusable(f"tool_name: {tool!r} is not a file-writing tool of {harness} the guard knows")
    value = _field(data, field)
    if harness == "codex":
        return patch_paths(value)
    return [value]


def read_paths(harness: str, data: dict[str, Any]) -> list[str]:
    """The files the read tool call in ``data`` read (a glob of read_many_files is skipped)."""
    tool = data.get("tool_name")
    field = READERS[harness].get(tool) if isinstance(tool, str) else None
    if field is None:
        raise Unusable(f"tool_name: {tool!r} is not a read tool of {harness} the guard knows")
    tool_input = data.get("tool_input")
    value = tool_input.get(field) if isinstance(tool_input, dict) else None
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str) and v and not set(v) & set("*?[")]


def _field(data: dict[str, Any], field: str) -> str:
    tool_input = data.get("tool_input")
    if not isinstance(tool_input, dict):
        raise Unusable("tool_input: not an object")
    value = tool_input.get(field)
    if not isinstance(value, str) or not value.strip():
        raise Unusable(f"tool_input.{field}: missing or not a string")
    return value


def patch_paths(patch: str) -> list[str]:
    """The files an apply_patch patch writes, in order, each once (a move writes both ends)."""
    found = [line[len(mark):].strip() for line in patch.splitlines() for mark in PATCH_MARKS
             if line.startswith(mark)]
    found = list(dict.fromkeys(p for p in found if p))
    if not found:
        raise Unusable("tool_input.command: a patch naming no file")
    return found


# -- answering ----------------------------------------------------------------------------------


def deny(harness: str, reason: str) -> dict[str, Any]:
    """The harness's own "do not run this tool" answer, with the reason its model is shown."""
    if harness == "gemini":
        return {"decision": "deny", "reason": reason}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": reason}}


def broken(harness: str, event: str, what: str, session: str) -> dict[str, Any] | None:
    """The once-a-session word that the guard is not working (None: said already)."""
    if not _first_time(session):
        return None
    text = (f"agents-room edit guard is not working ({what}); edits go through unguarded: before editing a file "
            "another agent may be editing, lease_claim it yourself.")
    print(f"agents-room edit guard: {what}", file=sys.stderr)
    return {"systemMessage": text, "hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _first_time(session: str) -> bool:
    """True the first time ``session`` asks (a marker file per session, never in the store:
    the store may be what is broken; in a folder of this user's alone, safe_write.own_folder)."""
    folder = os.path.join(os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp",
                          f"agents-room-editguard-{os.getuid()}")
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in session)[:120] or "unknown"
    from ..safe_write import UnsafeWrite, own_folder

    try:
        fd = os.open(os.path.join(own_folder(folder), name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    except (OSError, UnsafeWrite):
        return True  # no folder of this user's: said every time rather than never
    os.close(fd)
    return True


# -- one event ----------------------------------------------------------------------------------


def harness_pid(harness: str, ancestors: list[int]) -> int | None:
    """The harness's process among the hook's ancestors (the process its own MCP server
    records as the session's pid), else the nearest above the shell that ran the hook."""
    from .programs import PROGRAMS, program_names

    for pid in ancestors:
        if any(PROGRAMS.get(name) == harness for name in program_names(pid)):
            return pid
    return ancestors[1] if len(ancestors) > 1 else (ancestors[0] if ancestors else None)


def _store(*, plain: bool) -> tuple[Any, Any]:
    """The store's ``Store`` and its rule of what a repository is, imported with plain records
    standing in for ``dataclasses`` when ``plain`` (a SQLite store; a server's driver is
    imported at open, with the real one): agents_room/harnesses/plainrecords.py says why."""
    from .plainrecords import standing_in

    with standing_in(plain):
        from agents_room.store import Store
        from agents_room.store.rooms import git_toplevel
    return Store, git_toplevel


def respond(harness: str, data: dict[str, Any], *, edits: str = "claim", read: bool = False,
            db: str | None = None, keys: list[str] | None = None, ancestors: list[int] | None = None,
            cwd: str | None = None, store: Any = None) -> dict[str, Any] | None:
    """The guard's answer to one payload (None: print nothing, the tool runs). ``keys``,
    ``ancestors``, ``cwd``: the guard process's (default: this process's); ``store``: an open
    store to judge with (the agent's server answering its guard: editguard_serve.py)."""
    event = data.get("hook_event_name") if isinstance(data.get("hook_event_name"), str) else (
        "BeforeTool" if harness == "gemini" else "PreToolUse")
    ancestors = _ancestors() if ancestors is None else ancestors
    session = str(data.get("session_id") or (ancestors[0] if ancestors else os.getppid()))
    try:
        files = read_paths(harness, data) if read else written(harness, data)
    except Unusable as exc:
        return None if read else broken(harness, event, str(exc), session)
    if isinstance(data.get("cwd"), str) and data.get("cwd"):
        cwd = data["cwd"]
    elif cwd is None:
        cwd = os.getcwd()
    keys = _keys(data) if keys is None else keys
    pid = harness_pid(harness, ancestors)
    join_key = keys[0] if harness == "claude-code" and keys else None  # the key its server joins with
    try:
        if not read and edits == "claim" and held_already(db, cwd, files, keys, [pid] if pid else []):
            return None  # (leased files are in a repository: checked when they were claimed)
        if read and read_already(db, cwd, files, keys, [pid] if pid else []):
            return None
        if store is not None:  # the agent's server: the store imported and open already
            from agents_room.store.rooms import git_toplevel
        else:
            engines, = store_modules("engines")
            sqlite = (engines.locate(db, "--db") if db else engines.locate())[0] == engines.SQLITE
            if not sqlite and sys.flags.no_site:  # a server's store needs its driver from site-packages (as the news hook)
                import site

                site.main()
            Store, git_toplevel = _store(plain=sqlite)
        absolute = [os.path.join(cwd, os.path.expanduser(f)) for f in files]
        if not all(git_toplevel(os.path.dirname(os.path.abspath(p))) for p in absolute):
            return None  # outside any repository: not judged

        opened = Store.open(db, busy_timeout_s=BUSY_TIMEOUT_S, verify=False) if store is None else None
        try:
            using = opened or store
            if read:
                for path in files:
                    using.edit_read(cwd=cwd, path=path, harness=harness, keys=keys, pids=[pid] if pid else [],
                                    harness_pid=pid, join_key=join_key)
                return None
            verdict = using.edit_claim(cwd=cwd, files=files, harness=harness, keys=keys, pids=[pid] if pid else [],
                                       harness_pid=pid, join_key=join_key, claim=edits == "claim")
        finally:
            if opened is not None:
                opened.close()
    except Exception as exc:  # noqa: BLE001 (fail open: never block an edit because the guard broke)
        what = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return None if read else broken(harness, event, what, session)
    return None if verdict.ok else deny(harness, verdict.reason)


def add_parser(subparsers: Any) -> Any:
    """``agents-room edit-guard``: the same command as the installed entry, by name (what a
    committed project file runs)."""
    p = subparsers.add_parser("edit-guard", help="run as a harness's edit guard hook (reads the hook JSON on stdin)",
                              description=__doc__.split("\n\n")[0])
    _flags(p)
    p.set_defaults(run=run)
    return p


def _flags(p: Any) -> None:
    p.add_argument("--harness", choices=HARNESSES, required=True)
    p.add_argument("--edits", choices=EDITS[:2], default="claim",
                   help="claim (default): deny or claim; check: deny only")
    p.add_argument("--read", action="store_true", help="record the read tool's read baseline instead")


class Args:
    """The flags, as argparse's namespace holds them (the installed command's own line is read
    by hand: argparse, with ``re``, costs a quarter of the guard's common case)."""

    def __init__(self, harness: str, edits: str = "claim", read: bool = False, db: str | None = None) -> None:
        self.harness, self.edits, self.read, self.db = harness, edits, read, db


def parse(argv: list[str]) -> Args | None:
    """The command lines install writes (``--harness H --edits E``, ``--harness H --read``,
    ``--db PATH``); None for anything else, which argparse then reads (and explains)."""
    values: dict[str, Any] = {}
    rest = iter(argv)
    for arg in rest:
        if arg == "--read":
            values["read"] = True
        elif arg in ("--harness", "--edits", "--db"):
            values[arg[2:]] = next(rest, None)
        else:
            return None
    if values.get("harness") not in HARNESSES or values.get("edits", "claim") not in EDITS[:2] or \
            ("db" in values and not values["db"]):
        return None
    return Args(**values)


def main(argv: list[str] | None = None) -> int:
    """The installed command's entry (agents_room/editguard_entry.py)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args is None:
        import argparse

        parser = argparse.ArgumentParser(prog="agents-room edit-guard", description=__doc__.split("\n\n")[0])
        _flags(parser)
        parser.add_argument("--db", help="the store (default: $AGENTS_ROOM_DB, else ~/.agents-room/room.db)")
        args = parser.parse_args(argv)
    return run(args)


def judged(request: Any, store: Any) -> dict[str, Any] | None:
    """The agent's server's answer (``{"answer": ...}``) to its guard's ``request`` (see
    :func:`_asked`), judged with ``store``; None for a request it cannot read."""
    harness, data, keys = request.get("harness"), request.get("data"), request.get("keys")
    ancestors, cwd = request.get("ancestors"), request.get("cwd")
    if harness not in HARNESSES or request.get("edits") not in EDITS[:2] or not isinstance(data, dict) or \
            not isinstance(keys, list) or not all(isinstance(k, str) for k in keys) or \
            not isinstance(ancestors, list) or not all(type(p) is int for p in ancestors) or not isinstance(cwd, str):
        return None
    return {"answer": respond(harness, data, edits=request["edits"], read=request.get("read") is True,
                              db=store.location.target, keys=keys, ancestors=ancestors, cwd=cwd, store=store)}


def _asked(args: Any, data: dict[str, Any], db: str | None, keys: list[str],
           ancestors: list[int]) -> dict[str, Any] | None:
    """The answer of the agent's own server (editguard_serve.py), or None: judge here."""
    from .editguard_serve import ask

    request = {"harness": args.harness, "edits": args.edits, "read": bool(args.read), "data": data,
               "db": db or os.environ.get("AGENTS_ROOM_DB") or None, "keys": keys,
               "ancestors": ancestors, "cwd": os.getcwd()}
    return ask(request, ancestors, _dumps, _loads)


def run(args: Any) -> int:
    """One hook event: never fails the harness (exit 0, the answer on stdout, if any)."""
    db = getattr(args, "db", None)
    try:
        text = sys.stdin.read() if sys.stdin is not None and not sys.stdin.isatty() else ""
        data = _loads(text) if text.strip() else None
    except Exception:  # noqa: BLE001 (bad JSON: ValueError; the C scanner may raise SystemError)
        data = None
    event = "BeforeTool" if args.harness == "gemini" else "PreToolUse"
    if not isinstance(data, dict):
        out = None if args.read else broken(args.harness, event, "the hook payload is not a JSON object",
                                            str(os.getppid()))
    else:
        try:
            keys, ancestors = _keys(data), _ancestors()  # once, for the server or for this process
            out = _asked(args, data, db, keys, ancestors)
            if out is None:  # no server of its agent answered: judged here
                out = respond(args.harness, data, edits=args.edits, read=args.read, db=db, keys=keys,
                              ancestors=ancestors)
            else:
                out = out["answer"]
        except Exception as exc:  # noqa: BLE001 (fail open, whatever broke)
            out = None if args.read else broken(args.harness, event, f"{type(exc).__name__}: {exc}"[:300],
                                                str(data.get("session_id") or os.getppid()))
    if out:
        sys.stdout.write(_dumps(out) + "\n")
    return 0

"""``agents-room hook``: what a harness runs on its hook events, so an agent notices its mail.

It reads the Claude Code hook JSON on stdin (``session_id``, ``hook_event_name``,
``stop_hook_active``, ...), finds the session whose harness key is that ``session_id``, and
prints Claude Code hook JSON with plain facts about mail the session has not been told about
yet; nothing when there is nothing new. It follows the session's autonomy:

- ``hold`` and above: the facts ride ``UserPromptSubmit``, ``PostToolUse`` and ``SessionStart``
  as ``additionalContext``;
- ``notify`` and above: at ``Stop``, unannounced mail keeps the agent working
  (``{"decision": "block", "reason": ...}``), unless ``stop_hook_active`` says this Stop is
  already a continuation (so it cannot loop); ``hold`` never blocks a Stop.

``--wait`` is the Stop-hook wake lever (Claude Code's ``asyncRewake``, agents_room/harnesses/hook_wait.py):
it waits until mail for a session at ``wake`` arrives, prints the facts on stderr and exits 2,
which starts a turn in the idle chat; it exits 0 at its timeout.

A hook must never break the harness: any failure exits 0 with one line on stderr. It runs on
every event, so it must be cheap: the common answer ("nothing new") comes from one read-only
probe over SQLite without importing the store's package (whose import costs more than the
rest of the hook), by the store's own rules of where the store is (store/engines.py) and
what is news (store/delivery.py), loaded alone (agents_room/harnesses/hook_store.py); only when the
probe finds something does the store do the real work, by its own rules (store/news.py).
Never ``mcp``.

After its answer, a hook of a turn's start or end marks where the turn stands for the
terminal wake lever, when the harness runs in a tmux pane (agents_room/harnesses/turns.py:
``os`` only, and a small file write only in tmux).

The installed hook command starts here through hook_entry.py, without ``site``; on its quiet
path this module imports nothing but ``os``, turns.py, those two stdlib-only modules of the store and
two of CPython's C modules (``_json``, ``_sqlite3``): ``argparse`` and ``json`` pull in ``re``
(with ``enum``), ``sqlite3`` pulls in ``datetime``, which together cost about as much as the
interpreter's own start.
"""

from __future__ import annotations

import os
import sys

from . import turns
from .hook_store import store_modules

# Annotations only: importing typing would cost this hot path more than its own query.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from agents_room.store import Store

# The hook's own wait for the store's write lock: a hook must not stall the harness.
BUSY_TIMEOUT_S = 2.0
WAIT_TIMEOUT_S = 3000.0
WAIT_POLL_S = 0.5
# How far up the process tree a hook looks for the harness pid a session recorded
# (hook → shell → harness, with room for a wrapper).
ANCESTOR_DEPTH = 4


def seconds(text: str) -> float:
    """A finite number of seconds > 0 (argparse names this function when it refuses a value:
    "invalid seconds value: '-1'"). ValueError, not argparse's own error: the quiet path never
    imports argparse."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise ValueError(text)
    return value


# The hook's flags, declared once as argparse arguments: ``agents-room hook`` adds them to its
# subcommand, and the installed hook command (agents_room/hook_entry.py → main) reads them by hand.
FLAGS: dict[str, dict[str, Any]] = {
    "--event": {"help": "the hook event (default: hook_event_name from stdin)"},
    "--format": {"choices": ["claude", "cursor"], "default": "claude",
                 "help": "the harness's hook output (cursor: a stop hook answering followup_message)"},
    "--wait": {"action": "store_true", "help": "wait for mail to a session at wake, then exit 2 (asyncRewake)"},
    "--timeout": {"type": seconds, "default": WAIT_TIMEOUT_S, "help": "--wait: give up after this many seconds"},
    "--poll": {"type": seconds, "default": WAIT_POLL_S, "help": "--wait: seconds between looks at the store"},
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "hook",
        help="run as a harness hook: tell the agent about new mail (reads the hook JSON on stdin)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    for flag, spec in FLAGS.items():
        p.add_argument(flag, **spec)
    p.set_defaults(run=run)
    return p


def main(argv: list[str] | None = None) -> int:
    """``agents-room hook`` without the rest of the CLI: the installed hook command's entry."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args is None:  # help, a mistake, an abbreviation: argparse says it as the CLI would
        from ..parser import Parser

        parser = Parser(prog="agents-room")
        add_parser(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(["hook", *argv])
    return run(args)


class Args:
    """Parsed flags, as an ``argparse.Namespace`` holds them (without importing argparse)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def parse(argv: list[str]) -> Args | None:
    """The command lines harnesses run (``--flag value``, ``--flag=value``, ``--wait``), read
    from :data:`FLAGS` as argparse would read them; None for anything else (``--help``, an
    unknown or abbreviated flag, a bad value, a value starting with ``-``), which is then
    left to argparse."""
    values = {flag[2:]: False if "action" in spec else spec.get("default") for flag, spec in FLAGS.items()}
    rest = iter(argv)
    for arg in rest:
        flag, eq, text = arg.partition("=")
        spec = FLAGS.get(flag)
        if spec is None:
            return None
        if "action" in spec:  # store_true
            if eq:
                return None
            values[flag[2:]] = True
            continue
        if not eq:
            text = next(rest, None)
            if text is None or text.startswith("-"):
                return None
        try:
            value = spec.get("type", str)(text)
        except ValueError:
            return None
        if "choices" in spec and value not in spec["choices"]:
            return None
        values[flag[2:]] = value
    return Args(**values)


def run(args: argparse.Namespace | Args) -> int:
    """Never raises and never exits non-zero except ``--wait``'s deliberate 2."""
    try:
        data = _read_input(sys.stdin)
        engines, delivery = store_modules("engines", "delivery")
        db = getattr(args, "db", None)
        engine, path, _origin = engines.locate(db, "--db") if db else engines.locate()
        lean = engine == engines.SQLITE  # a file this process can probe, with the C module alone
        if not lean and sys.flags.no_site:
            # A server's store needs its driver from site-packages, which the installed
            # command's ``-S`` start skipped (agents_room/hook_entry.py): add them now, as site would have.
            import site

            site.main()
        if args.wait:
            from .hook_wait import wait

            return wait(_keys(data), _ancestors(), path, lean=lean, timeout=args.timeout, poll=args.poll,
                        busy_timeout_s=BUSY_TIMEOUT_S)
        out = respond(data, path, args.event, news=delivery.news_sql() if lean else None)
        # The pane's turn mark (the terminal wake lever's, agents_room/harnesses/turns.py): after
        # the answer, so an end of turn that the news kept going is not marked idle.
        turns.record(args.event or data.get("hook_event_name") or "", bool(out and out.get("decision") == "block"))
        if args.format == "cursor":
            out = for_cursor(out)
    except Exception as exc:  # noqa: BLE001 (a hook must never fail the harness)
        print(f"agents-room hook: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 0
    if out:
        sys.stdout.write(_dumps(out) + "\n")
    elif out is not None:
        sys.stdout.write("{}\n")  # Cursor's quiet answer, without that import
    return 0


def _read_input(stream: Any) -> dict[str, Any]:
    if stream is None or stream.isatty():
        return {}
    text = stream.read()
    if not text.strip():
        return {}
    data = _loads(text)
    if not isinstance(data, dict):
        raise TypeError("hook input is not a JSON object")
    return data


class _JsonDefaults:
    """The settings CPython's C JSON scanner reads off its context: ``json.JSONDecoder()``'s."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


def _loads(text: str) -> Any:
    """``json.loads(text)`` through the C scanner ``json.loads`` itself uses, without importing
    ``json``: it compiles regular expressions at import, and ``re`` (with ``enum``) costs about
    as much as everything else the quiet path does after the interpreter's start. Anything
    the scanner does not take whole (bad JSON, no ``_json``) goes to ``json.loads``, for its
    own answer or error."""
    try:
        from _json import make_scanner

        body = text.strip(" \t\n\r")  # JSON's own whitespace, as json.loads skips it
        value, end = make_scanner(_JsonDefaults)(body, 0)
        if end == len(body):
            return value
    except (ImportError, ValueError, StopIteration):
        pass
    import json

    return json.loads(text)


def _dumps(value: Any) -> str:
    """``json.dumps(value)`` for the hook's answers and the edit guard's requests (objects,
    lists, strings, integers, booleans, null), through the C function ``json.dumps`` itself encodes strings with, without importing
    ``json`` (see _loads): the news path imports nothing else that needs ``re``. Anything
    else goes to ``json.dumps``."""

    def encode(item: Any) -> str:
        if isinstance(item, str):
            return string(item)
        if isinstance(item, dict) and all(isinstance(key, str) for key in item):
            return "{" + ", ".join(f"{string(key)}: {encode(v)}" for key, v in item.items()) + "}"
        if isinstance(item, (list, tuple)):
            return "[" + ", ".join(encode(v) for v in item) + "]"
        if item is None or isinstance(item, bool):
            return {None: "null", True: "true", False: "false"}[item]
        if type(item) is int:
            return str(item)
        raise TypeError(type(item).__name__)

    try:
        from _json import encode_basestring_ascii as string

        return encode(value)
    except (ImportError, TypeError):
        pass
    import json

    return json.dumps(value)


# -- finding the session --------------------------------------------------------------------------


def _keys(data: dict[str, Any]) -> list[str]:
    """Harness keys to try, in order: the hook's session_id, then the environment's."""
    out: list[str] = []
    for value in (data.get("session_id"), os.environ.get("CLAUDE_CODE_SESSION_ID"),
                  os.environ.get("AGENTS_ROOM_HARNESS_KEY")):
        key = _uuid(value)
        if key and key not in out:
            out.append(key)
    return out


def _uuid(value: Any) -> str | None:
    """A UUID in the store's form (lowercase, dashed), or None. By hand: ``uuid`` and ``re``
    cost more to import than the rest of the probe."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    parts = text.split("-")
    if [len(p) for p in parts] != [8, 4, 4, 4, 12] or not all(c in "0123456789abcdef" for p in parts for c in p):
        return None
    return text


def _ancestors(depth: int = ANCESTOR_DEPTH) -> list[int]:
    """Our parent, its parent, ...: Claude Code runs a hook through a shell, and the session
    recorded Claude Code's pid. Used when the key does not match (after ``/clear`` the hook
    gets a new session id while the MCP server keeps the old one)."""
    return lineage(os.getppid(), depth)


def lineage(pid: int, depth: int = ANCESTOR_DEPTH) -> list[int]:
    """``pid`` and the processes above it, nearest first, at most ``depth`` of them (never
    init); read from ``/proc/<pid>/stat``, cut short where a process is gone."""
    out = []
    while pid > 1 and len(out) < depth:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


# A superset of what the store will find (it ignores expiry and the key's priority over
# the pid): a "no" here is a sure "nothing to say"; a "yes" hands over to the store. Two
# steps so each uses its index: sessions by key (or the few by pid), then their deliveries
# by primary key (recipient first), with the store's own rule of news (store/delivery.py).
_PROBE_SESSIONS = "SELECT id FROM sessions WHERE left_at IS NULL AND (harness_key IN ({keys}) OR pid IN ({pids}))"
_PROBE_NEWS = "SELECT 1 FROM deliveries d WHERE d.recipient IN ({ids}) AND {news} LIMIT 1"


def probe(path: str, keys: list[str], pids: list[int], news: str) -> bool:
    """Read-only: might a session with one of these keys or harness pids have something new
    (``news``: the store's condition on a delivery ``d``)?"""
    if not keys and not pids:
        return False
    # sqlite3.connect is _sqlite3.connect; the sqlite3 package around it imports datetime for
    # its date adapters, which the probe's integers and strings do not need.
    try:
        from _sqlite3 import connect
    except ImportError:  # an interpreter that keeps it elsewhere: the public name, at its cost
        from sqlite3 import connect

    # mode=rw: never create a store; the probe only reads (WAL readers do not block writers).
    uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"
    conn = connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        sql = _PROBE_SESSIONS.format(keys=",".join("?" * len(keys)) or "NULL", pids=",".join("?" * len(pids)) or "NULL")
        ids = [r[0] for r in conn.execute(sql, (*keys, *pids))]
        if not ids:
            return False
        return conn.execute(_PROBE_NEWS.format(ids=",".join("?" * len(ids)), news=news), ids).fetchone() is not None
    finally:
        conn.close()


def _open_store(path: str) -> Store:
    from agents_room.store import Store

    return Store.open(path, busy_timeout_s=BUSY_TIMEOUT_S, verify=False)


# -- one event ---------------------------------------------------------------------------------------


def respond(data: dict[str, Any], path: str, event: str | None = None, *, news: str | None = None
            ) -> dict[str, Any] | None:
    """The hook's answer to one event, or None to print nothing. ``news``: the store's rule of
    news (store/delivery.py) when ``path`` is a SQLite file the hook probes first; None: a
    server's store, which answers itself."""
    event = event or data.get("hook_event_name") or ""
    keys, pids = _keys(data), _ancestors()
    if news is None:  # no file to probe: the store answers
        from agents_room.store import news as rules

        from .hook_news import answer

        with _open_store(path) as store:
            return answer(data, event, store.db, rules, keys, pids)
    if not os.path.exists(path) or not probe(path, keys, pids, news):
        return None
    from .hook_news import answer, news_modules

    opening, rules = news_modules()  # (importing any other store module now would load it all)
    db = opening.open_database(path, opening.Clock(), BUSY_TIMEOUT_S, verify=False, create=False)
    try:
        return answer(data, event, db, rules, keys, pids)
    finally:
        if db.calls is not None:  # its count, if the event wrote nothing to carry it
            db.calls.flush(db)
        db.close()


def for_cursor(out: dict[str, Any] | None) -> dict[str, Any]:
    """Cursor's stop hook answers with ``followup_message`` (sent as the next user message),
    and always with a JSON object."""
    if out and out.get("decision") == "block":
        return {"followup_message": out["reason"]}
    return {}


if __name__ == "__main__":
    sys.exit(main())

"""The hook's answer when its probe found news (``agents_room.hook.respond``): the store's
own hook rules (``store.news``) on the store's database, loaded without the rest of the store.
Imported only on that path; the quiet path never loads this module."""

from __future__ import annotations

import os
import sys
import time

# Annotations only: this path imports no typing (nor dataclasses, pathlib: see news_modules).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Events whose hookSpecificOutput.additionalContext Claude Code adds to the turn.
CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "SessionStart"})
STOP_EVENTS = frozenset({"Stop", "SubagentStop", "stop"})  # "stop": Cursor


def answer(data: dict[str, Any], event: str, db: Any, rules: Any, keys: list[str],
            pids: list[int]) -> dict[str, Any] | None:
    """What the store's hook rules (``rules``: the module ``store.news``) say to ``event`` of
    the session these keys or pids belong to, on the store's database ``db``."""
    started = time.monotonic()
    session = rules.hook_session(db, keys, pids)
    if session is None:
        return None
    # Counted before the event's own write, which carries the count (store/callcounts.py);
    # the caller flushes it at close when that write did not happen.
    calls = rules.callcounts.attach(db)
    if calls is not None:
        calls.count("hook_news", session.id, "ok", started, time.monotonic())
    if event in STOP_EVENTS:
        # stop_hook_active (Claude Code) and loop_count (Cursor) say this Stop ends a
        # continuation we caused: never block it again, so the agent cannot loop.
        repeat = data.get("stop_hook_active") is True or (data.get("loop_count") or 0) != 0
        blocks = session.autonomy != "hold" and not repeat
        told = rules.hook_event(db, session.id, tell=blocks)
        if not told:
            return None
        return {"decision": "block", "reason": rules.describe(told, session.id)}
    told = rules.hook_event(db, session.id, tell=event in CONTEXT_EVENTS)
    if not told:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": rules.describe(told, session.id)}}


def news_modules() -> tuple[Any, Any]:
    """The store's modules the news path runs on (``store.sqlite_open``: opening the database,
    with its transactions and the admission queue; ``store.news``: the hook's rules on rows),
    without the package's ``__init__``, which imports every module of the store (the
    dashboard's overview, leases, rooms, reads, ...) and their records: that import was most
    of the news path's time. None of the modules loaded defines a record (a dataclass): the
    import of ``dataclasses`` (with ``inspect``) and the building of each record's class cost
    more than the path's queries. While they load, ``agents_room.store`` is a bare package (its folder only); then it
    and the modules loaded under it are forgotten (the caller keeps what it uses), so a later
    ``import agents_room.store`` loads the real package whole, with nothing half-made. In a
    process that has the store imported already, nothing changes."""
    if "agents_room.store" in sys.modules:
        from agents_room.store import news, sqlite_open

        return sqlite_open, news
    import types

    bare = types.ModuleType("agents_room.store")
    bare.__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "store")]
    bare.__package__ = "agents_room.store"
    before = set(sys.modules)
    sys.modules["agents_room.store"] = bare
    try:
        from agents_room.store import news, sqlite_open
    finally:  # forget them all: a later import of the store loads it whole, on its own
        for name in set(sys.modules) - before:
            if name.startswith("agents_room.store"):
                del sys.modules[name]
    return sqlite_open, news

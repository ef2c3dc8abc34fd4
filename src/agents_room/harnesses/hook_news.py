"""The hook's answer when its probe found news (``agents_room.harnesses.hook.respond``): the store's
own hook rules (``store.news``) on the store's database, loaded without the rest of the store.
Imported only on that path; the quiet path never loads this module."""

from __future__ import annotations

import time

from .hook_store import store_modules

# Annotations only: this path imports no typing (nor dataclasses, pathlib: see news_modules).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Events whose hookSpecificOutput.additionalContext the harness adds to the turn: Claude
# Code's, and Gemini CLI's BeforeAgent (a prompt) and AfterTool.
CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "SessionStart", "BeforeAgent", "AfterTool"})
# The end of a turn: "stop" is Cursor's; Gemini CLI's AfterAgent takes {"decision": "block"}
# as Claude Code's Stop does (the reason becomes the next prompt; stop_hook_active the repeat).
STOP_EVENTS = frozenset({"Stop", "SubagentStop", "stop", "AfterAgent"})


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
    """The store's modules the news path runs on (``store.sqlite.opening``: opening the database,
    with its transactions and the admission queue; ``store.news``: the hook's rules on rows),
    without the package's ``__init__`` (agents_room/harnesses/hook_store.py). None of the modules loaded
    defines a record (a dataclass): the import of ``dataclasses`` (with ``inspect``) and the
    building of each record's class cost more than the path's queries."""
    opening, news = store_modules("sqlite.opening", "news")
    return opening, news

"""Where a harness in a terminal pane stands between turns: the terminal wake lever
(agents_room/harnesses/terminal.py) types into a pane only while its harness waits for its
person, and the harness's own hooks are what know that.

A hook of a turn's start (Codex's ``UserPromptSubmit``, Gemini CLI's ``BeforeAgent``) marks the
pane ``turn``; a hook of its end (``Stop``, ``AfterAgent``) that let the turn end (it did not
block it to go on with news) marks it ``idle``. The lever marks it ``woken`` when it types a
prompt: not idle, so a second look cannot type again; and the harness's own start-of-turn hook
turning it into ``turn`` is the sign that the harness took the prompt.

The mark is a small file per pane, named by the tmux server's pid and the pane's number
(``TMUX``, ``TMUX_PANE``: tmux sets both for what runs in a pane, and a harness passes them to
its hooks), in ``$HOME/.agents-room/turns``: a pane is a thing of one host and one user, and
every harness gives its hooks and its MCP servers ``HOME``. A harness outside tmux gets no
mark, and costs its hooks nothing but two environment lookups.

Imported by the hook on every event: nothing but ``os``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

START_EVENTS = frozenset({"UserPromptSubmit", "BeforeAgent"})
END_EVENTS = frozenset({"Stop", "AfterAgent"})
IDLE, TURN, WOKEN = "idle", "turn", "woken"


def pane_key(env: Mapping[str, str]) -> str | None:
    """``tmux-<server pid>-<pane number>`` from ``TMUX`` (``socket,server pid,session``) and
    ``TMUX_PANE`` (``%N``); None outside tmux or for values not of that shape."""
    parts = env.get("TMUX", "").split(",")
    pane = env.get("TMUX_PANE", "")
    if len(parts) < 3 or not parts[0] or not parts[1].isdigit() or pane[:1] != "%" or not pane[1:].isdigit():
        return None
    return f"tmux-{parts[1]}-{pane[1:]}"


def folder(env: Mapping[str, str]) -> str | None:
    home = env.get("HOME")
    return os.path.join(home, ".agents-room", "turns") if home else None


def record(event: str, blocked: bool, env: Mapping[str, str] | None = None) -> str | None:
    """After a hook of ``event`` answered (``blocked``: it kept the turn going): mark the
    pane, if the harness runs in one. Returns the mark written, or None."""
    env = os.environ if env is None else env
    if event in START_EVENTS:
        state = TURN
    elif event in END_EVENTS and not blocked:
        state = IDLE
    else:
        return None
    key, where = pane_key(env), folder(env)
    if key is None or where is None:
        return None
    try:
        mark(where, key, state)
    except OSError:  # a HOME we cannot write: no mark (the lever then never types), the hook's answer kept
        return None
    return state


def mark(where: str, key: str, state: str) -> None:
    """Write ``state`` for pane ``key``: whole or not at all (a reader never sees half)."""
    os.makedirs(where, mode=0o700, exist_ok=True)
    path = os.path.join(where, key)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(state)
    os.replace(tmp, path)


def state(where: str, key: str) -> str | None:
    """The pane's last mark: ``idle``, ``turn``, ``woken``, or None when no hook of a harness in
    it has run yet (nothing is known: the lever does not type)."""
    try:
        with open(os.path.join(where, key)) as f:
            found = f.read().strip()
    except OSError:
        return None
    return found if found in (IDLE, TURN, WOKEN) else None


def age(where: str, key: str) -> float | None:
    """Seconds since the pane's mark was written; None without one."""
    import time

    try:
        return max(0.0, time.time() - os.stat(os.path.join(where, key)).st_mtime)
    except OSError:
        return None

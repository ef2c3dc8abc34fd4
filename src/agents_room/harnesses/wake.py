"""Wake levers: how agents-room starts a turn in an idle agent at autonomy ``wake``.

A lever is one small interface, :class:`WakeLever`: a ``name`` (recorded on the session at
``room_join``, so a sender's delivery starts ``stored``, not ``undeliverable``) and
``signal(session, deliveries) -> accepted``, where ``True`` means the harness confirmed it
took the signal, ``None`` that it cannot say, ``False`` that it refused.

:func:`deliver` drives the contract's state machine around any lever: it claims what the
store says is due (``stored`` and not yet told, or ``offered`` and older than the retry
window) by marking it ``offered`` *before* signalling, so a signal is emitted at most once
per window even with several processes looking; then it signals, and records ``accepted``
when the lever confirms. A lever that cannot confirm leaves the delivery ``offered`` until a
sign of the turn arrives (a hook event or a tool call of the session, see store/wake.py).

Levers here:

- :class:`CommandLever`: a configured command (``$AGENTS_ROOM_WAKE_COMMAND``), for harnesses
  with no other way in; exit 0 means accepted.
- :class:`StopHookLever`: Claude Code's ``asyncRewake`` Stop hook (``agents-room hook
  --wait``): the waiting hook prints the facts on stderr and exits 2.
- the Claude Code channel: :mod:`agents_room.harnesses.channel` (it needs the MCP connection).
- :class:`~agents_room.harnesses.terminal.TerminalLever`: typing into the tmux pane the harness
  runs in, for a harness with no lever of its own; a lever with a ``ready()`` is only
  signalled through while it says it can be (a pane that waits for its person).

Which lever a server process records comes from its environment: :func:`lever_name`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from ..store import RETRY_WINDOW_S, Pending, Session, Store
from ..store.mailwait import MailWaiter
from ..store.wake import describe
from . import terminal

CHANNEL = "claude-channel"
COMMAND = "command"
STOP_HOOK = "stop-hook"
TERMINAL = terminal.TERMINAL


class WakeLever(Protocol):
    name: str

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        """Emit one wake signal for these deliveries. True: the harness took it; None: it
        cannot be known here; False: it was refused (the deliveries stay ``offered`` and are
        signalled again after the retry window)."""
        ...


@dataclass(frozen=True)
class Signal:
    """One wake signal as :func:`deliver` emitted it."""

    session_id: str
    message_ids: list[int]
    lever: str
    accepted: bool | None


def deliver(
    store: Store, lever: WakeLever, *, session_id: str | None = None, adopt_retries: bool = False,
    retry_s: float = RETRY_WINDOW_S,
) -> list[Signal]:
    """Signal every due delivery through ``lever``: of ``session_id`` if given, else of every
    session whose recorded lever is ``lever.name``. A session that recorded another lever is
    left to it, except that with ``adopt_retries`` its overdue ``offered`` deliveries are
    signalled here (a fallback lever backing up one that may not be heard). Offers a session
    has since acted on are confirmed first."""
    if session_id is not None:
        store.wake_confirm(session_id)
    out = []
    for offer in store.wake_offers(session_id=session_id, lever=None if session_id else lever.name, retry_s=retry_s):
        sid = offer.session.id
        ready = getattr(lever, "ready", None)
        if ready is not None and not ready():
            continue  # no signal now (the terminal lever's busy pane): it stays as it is, looked at again
        mine = offer.session.wake_lever == lever.name
        due = [p.message_id for p in offer.pending if mine or (adopt_retries and p.state == "offered")]
        if not due:
            continue
        done = store.wake_signalled(sid, due, lever.name, None, retry_s)
        if not done:
            continue  # another process signalled them first
        told = [p for p in offer.pending if p.message_id in set(done)]
        try:
            accepted = lever.signal(offer.session, told)
        except Exception as exc:  # noqa: BLE001 (a broken lever must not stop the others)
            print(f"agents-room: wake lever {lever.name} failed: {exc}", file=sys.stderr)
            accepted = False
        if accepted:
            store.wake_accepted(sid, done)
        out.append(Signal(sid, done, lever.name, accepted))
    return out


# -- levers ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandLever:
    """Runs ``argv`` once per signal with the facts on stdin and in the environment
    (``AGENTS_ROOM_SESSION_ID``, ``AGENTS_ROOM_HARNESS_KEY``, ``AGENTS_ROOM_MESSAGE_IDS``).
    Exit 0: accepted; any other exit or a timeout: refused (retried after the window)."""

    argv: tuple[str, ...]
    timeout_s: float = 10.0
    name: str = COMMAND

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CommandLever | None:
        """From ``$AGENTS_ROOM_WAKE_COMMAND``; None when unset or its program is not found
        (then no lever is recorded and messages to a ``wake`` session are undeliverable,
        which a sender can see, rather than offered to nothing)."""
        text = env.get("AGENTS_ROOM_WAKE_COMMAND", "").strip()
        if not text:
            return None
        argv = tuple(shlex.split(text))
        if not argv or shutil.which(argv[0], path=env.get("PATH")) is None:
            print(f"agents-room: $AGENTS_ROOM_WAKE_COMMAND: {argv[0] if argv else text!r} not found", file=sys.stderr)
            return None
        return cls(argv)

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        env = {
            **os.environ, "AGENTS_ROOM_SESSION_ID": session.id, "AGENTS_ROOM_HARNESS_KEY": session.harness_key or "",
            "AGENTS_ROOM_MESSAGE_IDS": ",".join(str(p.message_id) for p in deliveries),
        }
        try:
            done = subprocess.run(
                self.argv, input=describe(deliveries, session.id), text=True, env=env, timeout=self.timeout_s,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0


@dataclass(frozen=True)
class StopHookLever:
    """Claude Code's ``asyncRewake`` Stop hook: the hook process waiting at Stop is the lever;
    it writes the facts to ``stream`` (its stderr, shown to the model) and then exits 2. The
    harness cannot confirm anything back to it, so acceptance waits for the woken turn."""

    stream: IO[str] = field(default=sys.stderr)
    name: str = STOP_HOOK

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        print(describe(deliveries, session.id), file=self.stream, flush=True)
        return None


def lever_name(env: Mapping[str, str], harness_pid: int | None = None) -> str | None:
    """The lever a stdio server process provides for its agent, recorded at ``room_join``:
    the channel when ``$AGENTS_ROOM_CHANNEL=1``, else a working ``$AGENTS_ROOM_WAKE_COMMAND``,
    else the Stop hook when ``$AGENTS_ROOM_WAKE_LEVER=stop-hook`` (``agents-room install``
    sets it beside the hook), else the terminal when the harness (``harness_pid``) runs in a
    tmux pane and the person did not turn it off (agents_room/harnesses/terminal.py), else none."""
    if env.get("AGENTS_ROOM_CHANNEL") == "1":
        return CHANNEL
    if CommandLever.from_env(env) is not None:
        return COMMAND
    if env.get("AGENTS_ROOM_WAKE_LEVER") == STOP_HOOK:
        return STOP_HOOK
    if terminal.TerminalLever.from_env(env, harness_pid) is not None:
        return TERMINAL
    return None


# -- watching for due deliveries ---------------------------------------------------------------------

POLL_S = 0.3
# Even when nothing was written, look again this often: an offer may have come due for retry.
RETRY_LOOK_S = 5.0
# The longest a watcher blocks in one wait: how soon it notices it should stop.
WAIT_CHUNK_S = 1.0
# While its lever declined to signal due mail (``lever.waiting``: the terminal lever's pane was
# busy), the watcher looks again this often: a pane is idle again the moment its person's or
# its harness's turn ends, and the mail should not wait for the retry look.
BUSY_LOOK_S = 0.5


class Watcher:
    """A daemon thread that runs :func:`deliver` for one process's agent. Between looks it
    blocks on the store's mail waiter (store/mailwait.py): on PostgreSQL it is told of the
    session's new mail at the sender's commit; on SQLite it polls the newest event's seq every
    ``poll_s``. It looks for real when told, and every ``RETRY_LOOK_S`` (a retry may be due).
    ``find`` names the session to serve (it may join later: until then it is looked for every
    ``poll_s``)."""

    def __init__(
        self, store: Store, lever: WakeLever, find: Callable[[], str | None], *, poll_s: float = POLL_S,
        retry_s: float = RETRY_WINDOW_S,
    ) -> None:
        self.store, self.lever, self.find = store, lever, find
        self.poll_s, self.retry_s = poll_s, retry_s
        self.session_id: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"wake-{lever.name}", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def wait_s(self, waiter: MailWaiter, last_look: float, now: float) -> float:
        """How long the next wait may block: until a retry look is due, at most WAIT_CHUNK_S;
        ``poll_s`` while a pushed waiter has no session to listen for yet."""
        left = max(0.0, RETRY_LOOK_S - (now - last_look))
        if waiter.pushed and self.session_id is None:
            left = min(left, self.poll_s)
        if getattr(self.lever, "waiting", False):
            left = min(left, max(0.0, BUSY_LOOK_S - (now - last_look)))
        return min(left, WAIT_CHUNK_S)

    def step(self, waiter: MailWaiter, last_look: float, now: float | None = None, wait_s: float = 0.0) -> float:
        """One wait of at most ``wait_s``, then a look if something may have arrived, a retry
        may be due, or the session is still to be found; returns the time of the last look."""
        told = waiter.wait(wait_s)
        now = time.monotonic() if now is None else now
        busy_look = getattr(self.lever, "waiting", False) and now - last_look >= BUSY_LOOK_S
        if (not told and now - last_look < RETRY_LOOK_S and not busy_look
                and not (waiter.pushed and self.session_id is None)):
            return last_look
        self.session_id = self.find()
        waiter.watch(self.session_id)
        if hasattr(self.lever, "waiting"):
            self.lever.waiting = False  # set again by the lever if it declines in this look
        if self.session_id is not None:
            deliver(self.store, self.lever, session_id=self.session_id, retry_s=self.retry_s)
        return now

    def _run(self) -> None:
        waiter: MailWaiter | None = None
        last_look = float("-inf")
        while not self._stop.is_set():
            try:
                waiter = waiter or self.store.mail_waiter(self.poll_s)
                last_look = self.step(waiter, last_look, None, self.wait_s(waiter, last_look, time.monotonic()))
            except Exception as exc:  # noqa: BLE001 (keep watching: the store may be busy for a moment)
                print(f"agents-room: wake watcher: {exc}", file=sys.stderr)
                self._stop.wait(self.poll_s)
        if waiter is not None:
            waiter.close()


def session_finder(store: Store, harness_key: str | None, pid: int | None) -> Callable[[], str | None]:
    """The live session this server process serves: by its harness key, else by its
    harness pid (every session a stdio server joins records its parent's pid)."""

    def find() -> str | None:
        found = store.hook_session([harness_key] if harness_key else [], [pid] if pid else [])
        return found.id if found else None

    return find


def command_watcher(store: Store, identity: Any, env: Mapping[str, str]) -> Watcher | None:
    """The running watcher of a stdio server whose agent's lever is ``$AGENTS_ROOM_WAKE_COMMAND``."""
    lever = CommandLever.from_env(env)
    if lever is None:
        return None
    return Watcher(store, lever, session_finder(store, identity.harness_key, identity.pid)).start()


def terminal_watcher(store: Store, identity: Any, env: Mapping[str, str]) -> Watcher | None:
    """The running watcher of a stdio server whose agent runs in a tmux pane (the terminal lever)."""
    lever = terminal.TerminalLever.from_env(env, identity.pid)
    if lever is None:
        return None
    return Watcher(store, lever, session_finder(store, identity.harness_key, identity.pid)).start()

"""Wake levers and the delivery state machine: stored → offered → accepted, undeliverable
when there is no lever, retry of offered only after the retry window (pinned clock)."""

from __future__ import annotations

import io
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agents_room.store import RETRY_WINDOW_S, Clock, Pending, Session, Store
from agents_room.harnesses.wake import (
    CHANNEL,
    COMMAND,
    RETRY_LOOK_S,
    STOP_HOOK,
    CommandLever,
    StopHookLever,
    Watcher,
    deliver,
    lever_name,
)


@dataclass
class RecordingLever:
    """A lever whose harness answers ``answer``; it keeps every signal it was given."""

    name: str = "sim"
    answer: bool | None = None
    calls: list[tuple[str, list[int]]] = field(default_factory=list)

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        self.calls.append((session.id, [p.message_id for p in deliveries]))
        return self.answer


def join(store: Store, repo: Path, label: str, autonomy: str = "wake", lever: str | None = "sim") -> str:
    return store.room_join(cwd=str(repo), pid=None, label=label, autonomy=autonomy, wake_lever=lever).session_id


def state(store: Store, sender: str, recipient: str, index: int = 0) -> str:
    return store.msg_sent(sender)[index].states[recipient]


def delivery_events(store: Store, recipient: str) -> list[tuple[str, list]]:
    return [(e.payload["to"], e.payload["items"]) for e in store.events() if e.kind == "delivery" and e.session_id == recipient]


def test_wake_without_a_lever_is_undeliverable(store: Store, repo: Path) -> None:
    me = join(store, repo, "alice", lever=None)
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="hi")
    assert state(store, bob, me) == "undeliverable"
    lever = RecordingLever()
    assert deliver(store, lever) == [] and lever.calls == []
    # Undeliverable is still unread: the hooks tell it at the next turn.
    assert [p.subject for p in store.hook_event(me, announce=True)] == ["hi"]


def test_stored_offered_accepted_through_a_confirming_lever(store: Store, repo: Path) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    mid = store.msg_send(bob, me, subject="hi").message_id
    assert state(store, bob, me) == "stored"

    lever = RecordingLever(answer=True)
    [sig] = deliver(store, lever)
    assert (sig.session_id, sig.message_ids, sig.accepted) == (me, [mid], True)
    assert lever.calls == [(me, [mid])]
    assert state(store, bob, me) == "accepted"
    assert delivery_events(store, me) == [("offered", [[mid, "stored"]]), ("accepted", [[mid, "offered"]])]
    # Accepted is never retried: the turn is coming.
    store.clock.shift(RETRY_WINDOW_S * 10)
    assert deliver(store, lever) == [] and len(lever.calls) == 1


def test_offered_is_retried_only_after_the_window(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    mid = store.msg_send(bob, me, subject="hi").message_id
    lever = RecordingLever(answer=None)
    assert [s.message_ids for s in deliver(store, lever)] == [[mid]]
    assert state(store, bob, me) == "offered"

    assert deliver(store, lever) == []
    clock.shift(RETRY_WINDOW_S - 1)
    assert deliver(store, lever) == []
    clock.shift(1)
    assert [s.message_ids for s in deliver(store, lever)] == [[mid]]
    assert state(store, bob, me) == "offered"
    retries = [e.payload for e in store.events() if e.kind == "wake"]
    assert retries == [{"lever": "sim", "items": [mid], "retry": True}]
    # The retry refreshed offered_at: the next one is a whole window away again.
    clock.shift(RETRY_WINDOW_S - 1)
    assert deliver(store, lever) == []
    assert len(lever.calls) == 2


def test_a_refused_signal_stays_offered_and_is_retried(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice", lever=COMMAND)
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="hi")
    [sig] = deliver(store, CommandLever(("false",)))
    assert sig.accepted is False and state(store, bob, me) == "offered"
    clock.shift(RETRY_WINDOW_S)
    [sig] = deliver(store, CommandLever(("true",)))
    assert sig.accepted is True and state(store, bob, me) == "accepted"


def test_the_command_lever_gets_the_facts(store: Store, repo: Path, tmp_path: Path) -> None:
    me = join(store, repo, "alice", lever=COMMAND)
    bob = join(store, repo, "bob", "notify", None)
    m1 = store.msg_send(bob, me, subject="migrations merged").message_id
    m2 = store.msg_send(bob, me, subject="rebase please").message_id
    out = tmp_path / "woken.txt"
    script = f'cat > {shlex.quote(str(out))}; echo "$AGENTS_ROOM_SESSION_ID $AGENTS_ROOM_MESSAGE_IDS" >> {shlex.quote(str(out))}'
    [sig] = deliver(store, CommandLever(("sh", "-c", script)))
    assert sig.accepted is True
    text = out.read_text()
    assert "2 unread messages" in text and "migrations merged" in text and "rebase please" in text
    assert text.strip().endswith(f"{me} {m1},{m2}")


def test_a_command_that_hangs_is_a_refusal(store: Store, repo: Path) -> None:
    me = join(store, repo, "alice", lever=COMMAND)
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="hi")
    [sig] = deliver(store, CommandLever(("sleep", "5"), timeout_s=0.2))
    assert sig.accepted is False and state(store, bob, me) == "offered"


@pytest.mark.parametrize("autonomy", ["hold", "notify"])
def test_below_wake_nothing_is_signalled(store: Store, repo: Path, autonomy: str) -> None:
    me = join(store, repo, "alice", autonomy)
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="hi")
    lever = RecordingLever(answer=True)
    assert deliver(store, lever) == [] and deliver(store, lever, session_id=me) == []
    assert state(store, bob, me) == "stored"


def test_mail_already_told_by_a_hook_needs_no_wake(store: Store, repo: Path) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="hi")
    assert len(store.hook_event(me, announce=True)) == 1
    assert deliver(store, RecordingLever()) == []
    assert state(store, bob, me) == "stored"


def test_read_and_expired_deliveries_are_not_signalled(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="short", ttl_s=5)
    lever = RecordingLever()
    clock.shift(6)
    assert deliver(store, lever) == []
    store.msg_send(bob, me, subject="read first")
    store.msg_recv(me)
    assert deliver(store, lever) == [] and lever.calls == []


def test_a_message_that_ran_out_after_the_look_is_not_signalled(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    mid = store.msg_send(bob, me, subject="short", ttl_s=5).message_id
    [offer] = store.wake_offers(session_id=me)  # the look, in its own transaction
    clock.shift(5)  # the message runs out before the signal is recorded
    assert store.wake_signalled(me, [p.message_id for p in offer.pending], "sim", None) == []
    assert delivery_events(store, me) == [] and state(store, bob, me) == "expired"  # (overdue, as msg_sent shows it)
    clock.shift(-5)
    store.wake_signalled(me, [mid], "sim", None)  # offered while fresh ...
    clock.shift(RETRY_WINDOW_S + 5)  # ... then run out: no retry either
    assert store.wake_signalled(me, [mid], "sim", None, RETRY_WINDOW_S) == []
    assert [e for e in store.events() if e.kind == "wake"] == []


def test_each_lever_signals_its_own_sessions(store: Store, repo: Path, clock: Clock) -> None:
    on_channel = join(store, repo, "alice", lever=CHANNEL)
    on_sim = join(store, repo, "carol", lever="sim")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, "*", subject="all hands")
    sim = RecordingLever()
    assert [s.session_id for s in deliver(store, sim)] == [on_sim]
    # The Stop hook backs up another lever only for its overdue offers.
    stop = RecordingLever(name=STOP_HOOK)
    assert deliver(store, stop, session_id=on_channel, adopt_retries=True) == []
    channel = RecordingLever(name=CHANNEL)
    assert [s.session_id for s in deliver(store, channel)] == [on_channel]
    clock.shift(RETRY_WINDOW_S)
    [sig] = deliver(store, stop, session_id=on_channel, adopt_retries=True)
    assert sig.lever == STOP_HOOK and state(store, bob, on_channel) == "offered"


def test_a_turn_confirms_an_offer(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="a")
    store.msg_send(bob, me, subject="b")
    deliver(store, RecordingLever())
    assert store.wake_confirm(me) == []  # no sign of a turn yet
    clock.shift(1)
    store.lease_claim(me, "src/x.py")  # a tool call of the session, after the offer
    assert store.wake_confirm(me) == [1, 2]
    assert [state(store, bob, me, i) for i in (0, 1)] == ["accepted", "accepted"]


def test_a_hook_event_confirms_an_offer(store: Store, repo: Path) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="a")
    deliver(store, RecordingLever())
    assert store.hook_event(me, announce=True) == []  # the signal already told it
    assert state(store, bob, me) == "accepted"


def test_two_processes_racing_signal_once(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="a")
    other = Store.open(store.path, clock=clock)
    try:
        offers = other.wake_offers(session_id=me)
        first = RecordingLever()
        deliver(store, first)
        # The other process had seen the same offer; its claim finds it already taken.
        assert other.wake_signalled(me, [p.message_id for p in offers[0].pending], "sim", None) == []
        assert len(first.calls) == 1
    finally:
        other.close()


def test_the_watcher_looks_only_when_something_changed(store: Store, repo: Path, clock: Clock) -> None:
    me = join(store, repo, "alice")
    bob = join(store, repo, "bob", "notify", None)
    lever = RecordingLever()
    finds: list[int] = []

    def find() -> str:
        finds.append(1)
        return me

    watcher = Watcher(store, lever, find)
    waiter = store.mail_waiter(0.0)  # SQLite: a look at the newest seq per wait
    look = watcher.step(waiter, float("-inf"), clock.now())
    assert len(finds) == 1 and lever.calls == []
    assert watcher.step(waiter, look, clock.now() + 1) == look and len(finds) == 1
    store.msg_send(bob, me, subject="a")
    look = watcher.step(waiter, look, clock.now() + 1)
    assert len(lever.calls) == 1
    # Quiet store, but a retry may come due: the watcher looks again every RETRY_LOOK_S.
    look = watcher.step(waiter, look, look + 0.1)  # its own writes moved the seq: one more look
    look = watcher.step(waiter, look, look + 0.1)
    calls = len(finds)
    clock.shift(RETRY_WINDOW_S)
    watcher.step(waiter, look, look + RETRY_LOOK_S)
    assert len(finds) == calls + 1 and len(lever.calls) == 2


def test_the_stop_hook_lever_writes_the_facts() -> None:
    stream = io.StringIO()
    session = Session("ab" * 8, "claude-code", None, "/tmp", None, None, [], "wake", STOP_HOOK, 0.0, 0.0, None)
    assert StopHookLever(stream).signal(session, [Pending(7, "cd" * 8, "bob", "ship it", "stored", 0.0)]) is None
    assert "ship it" in stream.getvalue() and "msg_recv" in stream.getvalue()


def test_lever_from_the_environment(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(Path(sys.executable).parent) + ":/usr/bin:/bin"
    assert lever_name({}) is None
    assert lever_name({"AGENTS_ROOM_CHANNEL": "1", "AGENTS_ROOM_WAKE_COMMAND": "true"}) == CHANNEL
    assert lever_name({"AGENTS_ROOM_WAKE_COMMAND": "true --flag", "PATH": path}) == COMMAND
    assert lever_name({"AGENTS_ROOM_WAKE_LEVER": STOP_HOOK}) == STOP_HOOK
    assert lever_name({"AGENTS_ROOM_WAKE_COMMAND": "no-such-program-here", "PATH": path}) is None
    assert "no-such-program-here" in capsys.readouterr().err
    assert CommandLever.from_env({"AGENTS_ROOM_WAKE_COMMAND": "true --flag", "PATH": path}).argv == ("true", "--flag")

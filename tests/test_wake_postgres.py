"""Wake across hosts on PostgreSQL: the channel watcher and ``agents-room hook --wait`` are
told of new mail at the sender's commit (LISTEN/NOTIFY), with real processes on the throwaway
cluster. Each waiter here polls so rarely (30 s) that only the push can wake it in time."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from agents_room.harnesses.hook_wait import waiters_folder
from agents_room.harnesses.install import hook_command
from agents_room.store import Pending, Session, Store
from agents_room.harnesses import wake

import shlex

INSTALLED = shlex.split(hook_command())
# Sends one message from a process of its own; prints the monotonic time right after commit.
_SEND = ("import sys, time; from agents_room.store import Store\n"
         "with Store.open(sys.argv[1]) as s:\n"
         "    s.msg_send(sys.argv[2], sys.argv[3], subject=sys.argv[4]); print(time.monotonic())\n")


def send_from_another_process(url: str, sender: str, to: str, subject: str) -> float:
    done = subprocess.run([sys.executable, "-c", _SEND, url, sender, to, subject], capture_output=True, text=True,
                          check=True, timeout=30)
    return float(done.stdout)


def _join(store: Store, repo: Path, label: str, autonomy: str, lever: str | None) -> tuple[str, str]:
    key = str(uuid.uuid4())
    j = store.room_join(cwd=str(repo), pid=None, label=label, harness="claude-code", harness_key=key,
                        autonomy=autonomy, wake_lever=lever)
    return j.session_id, key


@pytest.fixture
def pg(pg_url: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENTS_ROOM_DB", pg_url)
    with Store.open(pg_url) as s:
        yield pg_url, s


def test_hook_wait_is_told_at_the_senders_commit(pg, repo: Path, tmp_path: Path) -> None:
    url, store = pg
    me, key = _join(store, repo, "alice", "wake", "stop-hook")
    bob, _ = _join(store, repo, "bob", "notify", None)
    stdin = tmp_path / "stop.json"
    stdin.write_text(json.dumps({"session_id": key, "hook_event_name": "Stop", "stop_hook_active": False}))
    with stdin.open() as fh:
        waiter = subprocess.Popen([*INSTALLED, "--wait", "--poll", "30", "--timeout", "60"], stdin=fh,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        marker = Path(waiters_folder(store)) / me
        deadline = time.monotonic() + 20
        while not (marker.exists() and marker.read_text() == str(waiter.pid)):
            assert time.monotonic() < deadline and waiter.poll() is None, waiter.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.02)
        time.sleep(1.0)  # its first look is done: from here only a push (or its 30 s poll) wakes it
        committed = send_from_another_process(url, bob, me, "deploy is done")
        _out, err = waiter.communicate(timeout=30)
        woke = time.monotonic()
    finally:
        waiter.kill()
    assert waiter.returncode == 2, err
    assert "deploy is done" in err
    # Its poll comes 30 s after its first look, so 29 s or more after this commit: half that
    # leaves room for a loaded machine and none for the poll.
    assert woke - committed < 15.0
    assert [m.states[me] for m in store.msg_sent(bob)] == ["offered"]
    assert not marker.exists()


@pytest.mark.parametrize("sends", [3])
def test_the_watcher_is_told_at_the_senders_commit(pg, repo: Path, sends: int, monkeypatch: pytest.MonkeyPatch) -> None:
    url, store = pg
    me, _ = _join(store, repo, "alice", "wake", "sim")
    bob, _ = _join(store, repo, "bob", "notify", None)
    signalled: list[list[int]] = []
    heard = threading.Event()

    class Lever:
        name = "sim"

        def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
            signalled.append([p.message_id for p in deliveries])
            heard.set()
            return True

    # No look of its own during the test (its retry look every 5 s, its poll every 30 s): after
    # its first look only the push at a sender's commit can make it look, so each signal below
    # is the push's, however slow the machine.
    monkeypatch.setattr(wake, "RETRY_LOOK_S", 600.0)
    watcher = wake.Watcher(store, Lever(), lambda: me, poll_s=30.0).start()
    try:
        deadline = time.monotonic() + 20
        while watcher.session_id != me:  # its first look found the session and listens for it
            assert time.monotonic() < deadline, "the watcher never found its session"
            time.sleep(0.02)
        for n in range(sends):
            heard.clear()
            send_from_another_process(url, bob, me, f"note {n}")
            assert heard.wait(30), f"send {n} was never signalled"
    finally:
        watcher.stop()
    assert [len(ids) for ids in signalled] == [1] * sends  # each send its own signal, nothing twice
    assert [m.states[me] for m in store.msg_sent(bob)] == ["accepted"] * sends


def test_a_rolled_back_send_tells_nobody(pg, repo: Path) -> None:
    url, store = pg
    me, _ = _join(store, repo, "alice", "wake", "sim")
    waiter = store.mail_waiter(30.0)
    try:
        waiter.watch(me)
        assert waiter.wait(0) is True  # the first wait after watch: look at once
        assert waiter.wait(0.2) is False
        with pytest.raises(RuntimeError), store.db.write() as tx:
            tx.notify_mail([me])
            raise RuntimeError("the send failed after its NOTIFY")
        assert waiter.wait(0.5) is False  # NOTIFY is delivered at commit only
        with store.db.write() as tx:
            tx.notify_mail([me])
        assert waiter.wait(5) is True
    finally:
        waiter.close()


def test_the_installed_hook_tells_of_mail_on_postgres(pg, repo: Path) -> None:
    """The installed hook starts without site-packages (-S); a PostgreSQL store needs its driver."""
    url, store = pg
    me, key = _join(store, repo, "alice", "notify", None)
    bob, _ = _join(store, repo, "bob", "notify", None)
    store.msg_send(bob, me, subject="review my branch")
    payload = json.dumps({"session_id": key, "hook_event_name": "UserPromptSubmit"})
    done = subprocess.run(INSTALLED, input=payload, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "review my branch" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]

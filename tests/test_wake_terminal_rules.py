"""The terminal wake lever's rules, against a real tmux pane running a small line-reading
program (a stand-in for a harness's input line: a prompt glyph, the person's typing echoed, each
submitted line written to a file) and a real store: it types only into a pane whose turn marks
say idle and whose line holds nothing typed; what it typed is submitted once; the delivery goes
``stored → offered → accepted``, and stays ``stored`` (unannounced, for the hooks) while the pane
is busy. The real CLIs in real panes: tests/test_wake_terminal.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents_room import cli
from agents_room.harnesses import turns
from agents_room.harnesses.terminal import (
    OFF_ENV, PROMPT_ENV, PROMPT_HEAD, REDRAW_S, SUBMIT_GRACE_S, Pane, TerminalLever, find_pane, line_is_empty,
)
from agents_room.harnesses.wake import BUSY_LOOK_S, TERMINAL, Watcher, deliver, lever_name
from agents_room.store import Store

# A stand-in input line: "› " and the typed text; each submitted line appended to argv[1], and
# the pane's turn mark (argv[2]) set to "turn", as a harness's start-of-turn hook does.
READER = r"""
import os, sys
log, mark = sys.argv[1], sys.argv[2]
while True:
    line = input("\u203a ")
    with open(mark + ".tmp", "w") as f:
        f.write("turn")
    os.replace(mark + ".tmp", mark)
    with open(log, "a") as f:
        f.write(line + "\n")
"""
DEADLINE_S = 30.0

# Rows as the real CLIs draw them (tmux capture-pane -e), with the cursor's column.
CODEX_EMPTY = "\x1b[1m\u203a\x1b[0m\x1b[39m\x1b[49m \x1b[2mAsk Codex to do anything", 2
CODEX_TYPED = "\x1b[1m\u203a\x1b[0m\x1b[39m\x1b[49m hello half", 12
CODEX_TYPED_HOME = "\x1b[1m\u203a\x1b[0m\x1b[39m\x1b[49m hello half", 2  # the person pressed Home
GEMINI_EMPTY = " *   Type your message or @path/to/file", 3
GEMINI_TYPED = " * hello half", 13
GEMINI_TYPED_HOME = " * hello half", 3


def test_an_input_line_is_empty_only_with_nothing_typed_on_either_side_of_the_cursor() -> None:
    assert line_is_empty(*CODEX_EMPTY) and line_is_empty(*GEMINI_EMPTY)
    for typed in (CODEX_TYPED, CODEX_TYPED_HOME, GEMINI_TYPED, GEMINI_TYPED_HOME):
        assert not line_is_empty(*typed), typed
    assert not line_is_empty("\u203a \x1b[2mfaint\x1b[0m words", 2)  # plain words after a faint run


def test_turn_marks_follow_the_hooks_and_only_in_tmux(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "TMUX": "/tmp/tmux-1/default,4242,0", "TMUX_PANE": "%7"}
    where, key = turns.folder(env), turns.pane_key(env)
    assert key == "tmux-4242-7"
    assert turns.state(where, key) is None  # no hook yet: nothing known, nothing typed
    assert turns.record("BeforeAgent", False, env) == "turn" and turns.state(where, key) == "turn"
    assert turns.record("Stop", True, env) is None and turns.state(where, key) == "turn"  # kept going with news
    assert turns.record("AfterAgent", False, env) == "idle" and turns.state(where, key) == "idle"
    assert turns.record("PostToolUse", False, env) is None and turns.state(where, key) == "idle"
    assert turns.record("UserPromptSubmit", False, env) == "turn"
    assert turns.record("Stop", False, {"HOME": str(tmp_path)}) is None  # outside tmux: no mark
    assert turns.record("Stop", False, {**env, "HOME": "/proc/no-such-home"}) is None  # cannot write: no mark, no error
    for bad in ({"TMUX": "x", "TMUX_PANE": "%1"}, {"TMUX": "/s,12,0", "TMUX_PANE": "1"},
                {"TMUX": "/s,a,0", "TMUX_PANE": "%1"}):
        assert turns.pane_key(bad) is None, bad


@pytest.fixture
def pane(tmp_path: Path):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    socket = tmp_path / "tmux.sock"
    log = tmp_path / "typed.log"
    reader = tmp_path / "reader.py"
    reader.write_text(READER)
    subprocess.run(["tmux", "-S", str(socket), "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "20",
                    "cat"], check=True, timeout=30)
    server = int(subprocess.run(["tmux", "-S", str(socket), "display-message", "-p", "#{pid}"], capture_output=True,
                                text=True, check=True, timeout=30).stdout)
    pane_id = subprocess.run(["tmux", "-S", str(socket), "display-message", "-p", "#{pane_id}"], capture_output=True,
                             text=True, check=True, timeout=30).stdout.strip()
    env = {"HOME": str(tmp_path), "TMUX": f"{socket},{server},0", "TMUX_PANE": pane_id}
    marks = Path(turns.folder(env)) / turns.pane_key(env)
    subprocess.run(["tmux", "-S", str(socket), "respawn-pane", "-k", "-t", pane_id, sys.executable, str(reader),
                    str(log), str(marks)], check=True, timeout=30)
    try:
        yield env, log
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=30)
        try:
            os.kill(server, signal.SIGKILL)  # (kill-server ends it; this only where it did not)
        except ProcessLookupError:
            pass


def tmux(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["tmux", "-S", env["TMUX"].split(",")[0], *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout


def wait(test, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not test():
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S:g} s"
        time.sleep(0.05)


def test_the_lever_types_only_into_an_idle_pane_with_an_empty_line(pane, tmp_path: Path) -> None:
    env, log = pane
    wait(lambda: "\u203a" in tmux(env, "capture-pane", "-p"), "prompt")
    lever = TerminalLever.from_env(env, None)
    assert lever is not None and lever.pane == Pane.from_env(env)
    with Store.open(tmp_path / "room.db") as store:
        me = store.room_join(cwd=str(tmp_path), pid=None, label="agent", autonomy="wake", wake_lever=TERMINAL)
        peer = store.room_join(cwd=str(tmp_path), pid=None, label="peer")
        sid = me.session_id

        def state(mid: int) -> str:
            conn = sqlite3.connect(f"file:{tmp_path / 'room.db'}?mode=ro", uri=True)
            try:
                return conn.execute("SELECT state FROM deliveries WHERE recipient = ? AND message_id = ?",
                                    (sid, mid)).fetchone()[0]
            finally:
                conn.close()

        first = store.msg_send(peer.session_id, sid, "news", "body").message_id
        # no hook has marked the pane: nothing is known, nothing typed
        assert deliver(store, lever, session_id=sid) == [] and state(first) == "stored"
        turns.mark(lever.folder, lever.pane.key, turns.TURN)  # a turn runs: its hooks tell the mail
        assert deliver(store, lever, session_id=sid) == [] and state(first) == "stored"
        # idle, but the person has half-typed a line: not sent, not clobbered
        turns.mark(lever.folder, lever.pane.key, turns.IDLE)
        tmux(env, "send-keys", "-t", env["TMUX_PANE"], "-l", "half typed")
        wait(lambda: "half typed" in tmux(env, "capture-pane", "-p"), "the half-typed line")
        assert deliver(store, lever, session_id=sid) == [] and state(first) == "stored"
        assert lever.typed_seen is None  # (this soon after the idle mark it may be the TUI's redraw)
        marked = Path(lever.folder) / lever.pane.key
        os.utime(marked, (time.time() - 2 * REDRAW_S, time.time() - 2 * REDRAW_S))
        assert deliver(store, lever, session_id=sid) == [] and state(first) == "stored"
        assert lever.typed_seen is not None
        assert tmux(env, "capture-pane", "-p").count("half typed") == 1 and not log.exists()
        # the person clears the line: an empty line right after a typed one was most likely
        # submitted (the harness's start hook is about to run): nothing yet; once the grace
        # has passed, the prompt is typed, submitted once, accepted
        tmux(env, "send-keys", "-t", env["TMUX_PANE"], "C-u")
        wait(lambda: "half typed" not in tmux(env, "capture-pane", "-p"), "the cleared line")
        assert deliver(store, lever, session_id=sid) == [] and state(first) == "stored" and lever.waiting
        lever.typed_seen -= SUBMIT_GRACE_S  # (the grace, passed)
        signals = deliver(store, lever, session_id=sid)
        assert [(s.message_ids, s.accepted) for s in signals] == [([first], True)]
        assert state(first) == "accepted"
        wait(lambda: log.exists() and log.read_text(), "the submitted prompt")
        assert log.read_text().splitlines() == [lever.prompt.replace("{session_id}", sid)]
        assert PROMPT_HEAD in log.read_text() and sid in log.read_text()
        # the harness's start-of-turn mark confirmed it; until its end no second prompt
        assert turns.state(lever.folder, lever.pane.key) == turns.TURN
        second = store.msg_send(peer.session_id, sid, "more news", "body").message_id
        assert deliver(store, lever, session_id=sid) == [] and state(second) == "stored"
        assert deliver(store, lever, session_id=sid, retry_s=0) == []  # not even a retry of the first
        assert len(log.read_text().splitlines()) == 1


def test_the_lever_is_chosen_from_the_harness_process_and_can_be_turned_off(pane, tmp_path: Path) -> None:
    env, _ = pane
    child = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], **env})
    off = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], **env, OFF_ENV: "off"})
    try:
        own = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}  # Codex gives its servers no TMUX
        wait(lambda: b"TMUX_PANE" in Path(f"/proc/{child.pid}/environ").read_bytes(), "the child's environment")
        wait(lambda: b"TMUX_PANE" in Path(f"/proc/{off.pid}/environ").read_bytes(), "the child's environment")
        assert find_pane(own, child.pid) == Pane.from_env(env)
        assert lever_name(own, child.pid) == TERMINAL
        assert find_pane(own, off.pid) is None and lever_name(own, off.pid) is None
        assert lever_name({**own, OFF_ENV: "off"}, child.pid) is None
        assert lever_name(own, None) is None  # no pane anywhere
        assert TerminalLever.from_env({**own, PROMPT_ENV: "mail for\n{session_id}"}, child.pid).prompt == \
            "mail for {session_id}"
        # the harness quits: its pane is a shell again, never typed into (marked idle, line empty)
        lever = TerminalLever.from_env(own, child.pid)
        turns.mark(lever.folder, lever.pane.key, turns.IDLE)
        wait(lambda: "\u203a" in tmux(env, "capture-pane", "-p"), "prompt")
        assert lever.ready()
        child.kill()
        child.wait()
        assert not lever.ready()
        assert lever_name({**own, "AGENTS_ROOM_WAKE_LEVER": "stop-hook"}, child.pid) == "stop-hook"  # its own first
    finally:
        for p in (child, off):
            p.kill()
            p.wait()


def test_who_and_doctor_show_each_session_s_lever(tmp_path: Path, monkeypatch, capsys) -> None:
    db = tmp_path / "room.db"
    with Store.open(db) as store:
        store.room_join(cwd=str(tmp_path), pid=None, label="tty", autonomy="wake", wake_lever=TERMINAL)
        store.room_join(cwd=str(tmp_path), pid=None, label="bare")
    monkeypatch.setenv("AGENTS_ROOM_DB", str(db))
    monkeypatch.setenv("HOME", str(tmp_path))

    def run(*argv: str) -> str:
        cli.main(list(argv))
        return capsys.readouterr().out

    listed = json.loads(run("who", "--json"))
    assert {m["label"]: m["wake_lever"] for m in listed} == {"tty": "terminal", "bare": None}
    table = run("who")
    head, *rows = table.splitlines()
    at = head.index("WAKE LEVER")
    assert {r.split()[1]: r[at:].split()[0] for r in rows if not r.startswith("store:") and len(r) > at} == {
        "tty": "terminal", "bare": "-"}, table
    assert "wake levers:    1 none, 1 terminal" in run("doctor")


@pytest.mark.slow
def test_on_postgresql_the_watcher_types_into_its_pane_when_another_process_sends(pane, pg_url: str) -> None:
    # The lever runs in the recipient's own server (here: a watcher in this process, on the
    # pane's host); the sender is another process, told through the store alone.
    env, log = pane
    wait(lambda: "\u203a" in tmux(env, "capture-pane", "-p"), "prompt")
    lever = TerminalLever.from_env(env, None)
    with Store.open(pg_url) as store:
        sid = store.room_join(cwd=str(log.parent), pid=None, label="agent", autonomy="wake",
                              wake_lever=TERMINAL).session_id
        peer = store.room_join(cwd=str(log.parent), pid=None, label="peer").session_id
        turns.mark(lever.folder, lever.pane.key, turns.IDLE)
        watcher = Watcher(store, lever, lambda: sid).start()
        try:
            send = ("import sys; from agents_room.store import Store\n"
                    "with Store.open(sys.argv[1]) as s: s.msg_send(sys.argv[2], sys.argv[3], subject='pg news')\n")
            subprocess.run([sys.executable, "-c", send, pg_url, peer, sid], check=True, timeout=60)
            wait(lambda: log.exists() and sid in log.read_text(), "the typed prompt")
            wait(lambda: _state(store, sid) == "accepted", "accepted")
        finally:
            watcher.stop()
        assert len(log.read_text().splitlines()) == 1


def _state(store: Store, recipient: str) -> str:
    with store.db.read() as tx:
        return tx.one("SELECT state FROM deliveries WHERE recipient = ?", (recipient,))[0]


@pytest.mark.slow  # three runs of the installed hook
def test_the_installed_hook_marks_the_pane_and_not_an_end_of_turn_it_kept_going(tmp_path: Path, repo: Path,
                                                                                 monkeypatch) -> None:
    # The installed hook command, as the harness runs it in a pane: its start marks `turn`;
    # a Stop that blocks with news (the turn goes on) leaves it; the next, quiet Stop marks `idle`.
    from test_hook import event, hook, join

    db = tmp_path / "room.db"
    monkeypatch.setenv("AGENTS_ROOM_DB", str(db))
    pane_env = {"HOME": str(tmp_path), "TMUX": "/tmp/tmux-1/default,777,0", "TMUX_PANE": "%3"}
    where, key = turns.folder(pane_env), turns.pane_key(pane_env)
    with Store.open(db) as store:
        me, harness_key = join(store, repo, "alice", "wake")
        bob, _ = join(store, repo, "bob")
        assert hook(event(harness_key, "UserPromptSubmit", prompt="go"), env=pane_env).returncode == 0
        assert turns.state(where, key) == turns.TURN
        store.msg_send(bob, me, subject="news for the stop")
        blocked = hook(event(harness_key, "Stop", stop_hook_active=False), env=pane_env)
        assert json.loads(blocked.stdout)["decision"] == "block"
        assert turns.state(where, key) == turns.TURN
        quiet = hook(event(harness_key, "Stop", stop_hook_active=True), env=pane_env)
        assert (quiet.returncode, quiet.stdout) == (0, "")
        assert turns.state(where, key) == turns.IDLE
        assert hook(event(harness_key, "Stop"), env={"HOME": str(tmp_path)}).returncode == 0  # outside tmux
        assert sorted(os.listdir(where)) == [key]


def test_while_the_lever_waits_for_its_pane_the_watcher_looks_again_soon(pane, tmp_path: Path) -> None:
    # Mail came while a turn ran; the turn's end writes nothing to the store, so only the
    # watcher's own look finds the pane idle: after BUSY_LOOK_S, not the retry look's 5 s.
    env, log = pane
    wait(lambda: "\u203a" in tmux(env, "capture-pane", "-p"), "prompt")
    lever = TerminalLever.from_env(env, None)
    with Store.open(tmp_path / "room.db") as store:
        sid = store.room_join(cwd=str(tmp_path), pid=None, label="agent", autonomy="wake",
                              wake_lever=TERMINAL).session_id
        peer = store.room_join(cwd=str(tmp_path), pid=None, label="peer").session_id
        turns.mark(lever.folder, lever.pane.key, turns.TURN)
        store.msg_send(peer, sid, "news", "body")
        watcher = Watcher(store, lever, lambda: sid)
        waiter = store.mail_waiter(0.0)
        try:
            look = watcher.step(waiter, float("-inf"), 1000.0)
            assert lever.waiting and not log.exists()
            assert watcher.step(waiter, look, look + BUSY_LOOK_S / 2) == look  # not yet
            turns.mark(lever.folder, lever.pane.key, turns.IDLE)  # the turn ended
            assert watcher.wait_s(waiter, look, look + BUSY_LOOK_S / 2) <= BUSY_LOOK_S / 2
            assert watcher.step(waiter, look, look + BUSY_LOOK_S) == look + BUSY_LOOK_S
            wait(lambda: log.exists() and sid in log.read_text(), "the typed prompt")
            assert not lever.waiting
        finally:
            waiter.close()

"""The hook: real subprocesses fed Claude Code hook JSON on stdin, over a real store. They run
the command ``agents-room install`` writes (``python -I -S .../hook_entry.py``); the same
answers from ``agents-room hook`` are checked beside it."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import agents_room
from agents_room.harnesses import hook as hook_module
from agents_room.harnesses.install import hook_command
from agents_room.store import Store

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
INSTALLED = shlex.split(hook_command())
COMMANDS = {"installed": INSTALLED, "cli": [AGENTS_ROOM, "hook"]}


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store on the real clock (the hook processes use the real clock too)."""
    path = tmp_path / "store" / "room.db"
    monkeypatch.setenv("AGENTS_ROOM_DB", str(path))
    return path


@pytest.fixture
def live(db: Path):
    s = Store.open(db)
    yield s
    s.close()


def hook(payload: dict | str | None, *args: str, env: dict | None = None, timeout: float = 30,
         command: list[str] = INSTALLED) -> subprocess.CompletedProcess:
    text = payload if isinstance(payload, str) else json.dumps(payload or {})
    return subprocess.run(
        [*command, *args], check=False, input=text, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def join(store: Store, repo: Path, label: str, autonomy: str = "notify", lever: str | None = None,
         pid: int | None = None) -> tuple[str, str]:
    key = str(uuid.uuid4())
    j = store.room_join(cwd=str(repo), pid=pid, label=label, harness="claude-code", harness_key=key,
                        autonomy=autonomy, wake_lever=lever)
    return j.session_id, key


def event(key: str, name: str, **extra: object) -> dict:
    return {"session_id": key, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": name, **extra}


def context_of(proc: subprocess.CompletedProcess, name: str) -> str:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == name
    return out["hookSpecificOutput"]["additionalContext"]


def states(store: Store, sender: str, recipient: str) -> list[str]:
    return [m.states[recipient] for m in reversed(store.msg_sent(sender))]


@pytest.mark.parametrize("autonomy", ["hold", "notify", "wake"])
@pytest.mark.parametrize("name", ["UserPromptSubmit", "PostToolUse", "SessionStart"])
def test_context_events_announce_once(live: Store, repo: Path, name: str, autonomy: str) -> None:
    me, key = join(live, repo, "alice", autonomy, lever="stop-hook" if autonomy == "wake" else None)
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="schema change in wire.go")
    live.msg_send(bob, "*", subject="please rebase")

    text = context_of(hook(event(key, name)), name)
    assert "2 unread messages" in text
    assert f"bob ({bob})" in text
    assert "schema change in wire.go" in text and "please rebase" in text
    assert f"msg_recv with session_id={me}" in text

    again = hook(event(key, name))
    assert again.returncode == 0 and again.stdout == ""

    live.msg_send(bob, me, subject="third")
    text = context_of(hook(event(key, name)), name)
    assert "1 unread message " in text and "third" in text and "please rebase" not in text
    # Announcing is not reading: the messages are all still unread.
    assert live.msg_unread(me) == 3


def test_nothing_when_empty_or_unknown(live: Store, repo: Path, db: Path) -> None:
    _me, key = join(live, repo, "alice")
    for payload in (event(key, "PostToolUse"), event(str(uuid.uuid4()), "PostToolUse"), {}):
        proc = hook(payload)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_no_store_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "room.db"
    proc = hook(event(str(uuid.uuid4()), "PostToolUse"), env={"AGENTS_ROOM_DB": str(path)})
    assert (proc.returncode, proc.stdout) == (0, "")
    assert not path.exists() and not path.parent.exists()


@pytest.mark.parametrize("autonomy", ["notify", "wake"])
def test_stop_blocks_with_the_facts_once(live: Store, repo: Path, autonomy: str) -> None:
    me, key = join(live, repo, "alice", autonomy, lever="stop-hook")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="lease on api.py released")

    proc = hook(event(key, "Stop", stop_hook_active=False))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["decision"] == "block"
    assert "lease on api.py released" in out["reason"] and "msg_recv" in out["reason"]

    again = hook(event(key, "Stop", stop_hook_active=False))
    assert (again.returncode, again.stdout) == (0, "")


def test_stop_loop_guard_keeps_the_mail_for_later(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice", "notify")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")

    proc = hook(event(key, "Stop", stop_hook_active=True))
    assert (proc.returncode, proc.stdout) == (0, "")
    # Not announced by the guarded Stop, so the next turn hears of it.
    assert "ping" in context_of(hook(event(key, "UserPromptSubmit", prompt="go on")), "UserPromptSubmit")


def test_hold_never_blocks_stop(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice", "hold")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")

    proc = hook(event(key, "Stop", stop_hook_active=False))
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "ping" in context_of(hook(event(key, "UserPromptSubmit", prompt="hi")), "UserPromptSubmit")


def test_event_flag_overrides_the_input(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")
    assert "ping" in context_of(hook({"session_id": key}, "--event", "PostToolUse"), "PostToolUse")


def test_key_from_the_environment(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")
    proc = hook({"hook_event_name": "PostToolUse"}, env={"CLAUDE_CODE_SESSION_ID": key.upper()})
    assert "ping" in context_of(proc, "PostToolUse")


def test_harness_pid_finds_the_session_after_clear(live: Store, repo: Path) -> None:
    # After /clear the hook sees a new session id; the session recorded the harness pid,
    # which is the hook's parent (here: this test process).
    me, _old_key = join(live, repo, "alice", pid=os.getpid())
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")
    assert "ping" in context_of(hook(event(str(uuid.uuid4()), "PostToolUse")), "PostToolUse")


def test_a_hook_event_confirms_an_offer(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice", "wake", lever="stop-hook")
    bob, _ = join(live, repo, "bob")
    mid = live.msg_send(bob, me, subject="wake up").message_id
    assert live.wake_signalled(me, [mid], "stop-hook", None) == [mid]
    assert states(live, bob, me) == ["offered"]

    proc = hook(event(key, "PostToolUse"))
    assert (proc.returncode, proc.stdout) == (0, "")  # the wake signal already told it
    assert states(live, bob, me) == ["accepted"]


@pytest.mark.parametrize("payload", ["not json", "[1, 2]", '{"session_id": 5, "hook_event_name": []}'])
def test_bad_input_never_fails_the_harness(live: Store, repo: Path, payload: str) -> None:
    proc = hook(payload)
    assert proc.returncode == 0 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) <= 1


def test_a_broken_store_never_fails_the_harness(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 100)
    proc = hook(event(str(uuid.uuid4()), "PostToolUse"), env={"AGENTS_ROOM_DB": str(path)})
    assert (proc.returncode, proc.stdout) == (0, "")
    assert len(proc.stderr.strip().splitlines()) == 1 and "agents-room hook" in proc.stderr
    assert path.read_bytes() == b"this is not a database" * 100


def imported(argv: list[str], payload: dict) -> tuple[set[str], str]:
    """The modules a run of ``argv`` imports (``python -X importtime``), and its output."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], check=False, input=json.dumps(payload),
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}, proc.stdout


def test_the_quiet_path_imports_neither_mcp_nor_the_store(live: Store, repo: Path) -> None:
    _me, key = join(live, repo, "alice")
    for argv in ([sys.executable, AGENTS_ROOM, "hook"], INSTALLED):
        modules, said = imported(argv, event(key, "PostToolUse"))
        assert said == "" and "agents_room.harnesses.hook" in modules
        assert not {m for m in modules if m.split(".")[0] in {"mcp", "numpy", "rich", "pydantic", "anyio"}}
        assert "agents_room.store" not in modules


def test_the_installed_quiet_path_skips_site_and_the_costly_stdlib(live: Store, repo: Path) -> None:
    # Each of these costs milliseconds at import (re, enum, datetime, ...); the installed
    # command's answer to "nothing new" needs none of them.
    _me, key = join(live, repo, "alice")
    modules, said = imported(INSTALLED, event(key, "PostToolUse"))
    assert said == "" and {"agents_room.harnesses.hook", "_sqlite3", "_json"} <= modules
    # The store's own rules of where it is and of news, not copies of them: their two
    # stdlib-only modules, loaded alone (agents_room/harnesses/hook_store.py).
    assert {"agents_room.store.engines", "agents_room.store.delivery"} <= modules
    costly = {"site", "re", "json", "sqlite3", "datetime", "argparse", "typing", "dataclasses", "pathlib", "enum",
              "agents_room.cli", "agents_room.store"}
    assert not modules & costly


def test_the_news_path_imports_the_store_without_what_it_never_uses(live: Store, repo: Path) -> None:
    # With news the hook runs the store's own rules, and importing them is most of its time:
    # only the database and the hook's rules (on rows: store/news.py) are loaded, not the
    # package (which imports every module of the store) nor the modules of the store's records
    # (dataclasses, with inspect); the store imports the rest where it uses them (creating the
    # schema, a harness key, drift's hash, an event's JSON, a futex wait). Each of typing,
    # pathlib, json (with re), datetime (sqlite3's) and ctypes costs milliseconds at import.
    me, key = join(live, repo, "alice")
    bob, _ = join(live, repo, "bob")
    live.msg_send(bob, me, subject="ping")
    modules, said = imported(INSTALLED, event(key, "UserPromptSubmit"))
    assert "ping" in said and {"agents_room.store.sqlite.database", "agents_room.store.news"} <= modules
    unused = {"secrets", "hmac", "hashlib", "importlib.resources", "uuid", "platform", "mcp", "pydantic",
              "dataclasses", "inspect", "typing", "pathlib", "json", "re", "datetime", "ctypes",
              "agents_room.store", "agents_room.store.overview", "agents_room.store.leases",
              "agents_room.store.rooms", "agents_room.store.reads", "agents_room.store.wake",
              "agents_room.store.messages", "agents_room.store.sessions"}
    assert not modules & unused


def test_after_the_news_path_the_whole_store_still_imports() -> None:
    """The news path loads the store's database and hook rules without the package, then
    forgets them: importing the store afterwards gives the real package, whole (its modules
    reachable as attributes), nothing half-made."""
    code = ("import sys; sys.path.append(sys.argv[1]); from agents_room.harnesses import hook_news; "
            "opening, news = hook_news.news_modules(); assert callable(opening.open_database) and news.hook_event; "
            "assert not [m for m in sys.modules if m.startswith('agents_room.store')]; "
            "import agents_room.store.wake; import agents_room.store as s; "
            "assert agents_room.store.wake.describe and s.Store.hook_event and s.open_database; print('whole')")
    src = str(Path(agents_room.__file__).parents[1])
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, src], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "whole", done.stderr


@pytest.mark.parametrize("value", [
    {}, {"decision": "block", "reason": 'agents-room: 2 unread "é" \u2028 \x00 \U0001f389\n- #1'},
    {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "a\tb"}}, {"followup_message": ""},
    {"n": 1}, {"a": None}, {1: "x"}, ["x"],
])
def test_answers_are_written_as_json_dumps_writes_them(value: object) -> None:
    # Without importing json on the news path: objects of strings by hand, the rest by json.
    assert hook_module._dumps(value) == json.dumps(value)


@pytest.mark.parametrize("argv", [
    [], ["--wait"], ["--wait", "--timeout", "3540"], ["--format", "cursor", "--event", "stop"],
    ["--format=cursor", "--event=stop"], ["--event", ""], ["--poll", "0.1", "--timeout", "1e3", "--wait"],
    ["--event", "Stop", "--event", "PostToolUse"],
])
def test_flags_read_by_hand_as_argparse_reads_them(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="agents-room")
    hook_module.add_parser(parser.add_subparsers(dest="command", required=True))
    expected = {k: v for k, v in vars(parser.parse_args(["hook", *argv])).items() if k not in {"command", "run"}}
    fast = hook_module.parse(argv)
    assert fast is not None and vars(fast) == expected


@pytest.mark.parametrize("argv", [
    ["--format", "nope"], ["--timeout", "soon"], ["--event"], ["--wait=yes"], ["--tim", "3"], ["extra"], ["-h"],
    ["--timeout", "-1"],
])
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert hook_module.parse(argv) is None


@pytest.mark.parametrize("args", [["--format", "nope"], ["--help"]])
def test_the_installed_command_says_usage_as_the_cli_does(args: list[str]) -> None:
    installed, cli = hook({}, *args), hook({}, *args, command=COMMANDS["cli"])
    assert (installed.returncode, installed.stdout, installed.stderr) == (cli.returncode, cli.stdout, cli.stderr)
    assert ("usage: agents-room hook" if "--help" in args else "(see agents-room hook --help)") in (
        installed.stdout + installed.stderr)


def test_the_installed_command_takes_a_negative_number_as_argparse_does(live: Store, repo: Path) -> None:
    _me, key = join(live, repo, "alice", "wake", lever="stop-hook")
    proc = hook(event(key, "Stop"), "--wait", "--timeout", "-1")  # argparse reads -1 as a value, and refuses it
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "agents-room hook: argument --timeout: invalid seconds value: '-1' (see agents-room hook --help)\n"


def test_the_cli_answers_as_the_installed_command(repo: Path, tmp_path: Path) -> None:
    """``agents-room hook`` runs the same code: the same answer to each step of a session, each
    command over a store of its own."""
    answers = {}
    for name, command in COMMANDS.items():
        db = tmp_path / name / "room.db"
        env = {"AGENTS_ROOM_DB": str(db)}
        steps = []
        with Store.open(db) as live:
            me, key = join(live, repo, "alice", "notify")
            bob, _ = join(live, repo, "bob")
            for payload, args in ((event(key, "PostToolUse"), ()), ("send", ()), (event(key, "PostToolUse"), ()),
                                  (event(key, "PostToolUse"), ()), ("send", ()), (event(key, "Stop"), ()),
                                  ("send", ()), ({"session_id": key}, ("--format", "cursor", "--event", "stop")),
                                  ({"session_id": key}, ("--format", "cursor", "--event", "stop"))):
                if payload == "send":
                    live.msg_send(bob, me, subject="ping")
                    continue
                proc = hook(payload, *args, env=env, command=command)
                steps.append((proc.returncode, proc.stdout.replace(me, "ME").replace(bob, "BOB"), proc.stderr))
        answers[name] = steps
    assert answers["installed"] == answers["cli"]
    assert [out.strip() for _rc, out, _err in answers["installed"]][-1] == "{}"
    assert [bool(out) for _rc, out, _err in answers["installed"]] == [False, True, False, True, True, True]


def test_the_installed_command_works_from_a_plain_site_packages(live: Store, repo: Path, tmp_path: Path) -> None:
    """A regular (wheel) install: the package in a folder no path finder knows, found only by
    the entry itself; the store (and its schema file) load from there on the news path."""
    site = tmp_path / "site-packages"
    shutil.copytree(Path(agents_room.__file__).parent, site / "agents_room",
                    ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-I", "-S", str(site / "agents_room" / "hook_entry.py")]
    me, key = join(live, repo, "alice")
    bob, _ = join(live, repo, "bob")
    assert hook(event(key, "PostToolUse"), command=command).stdout == ""
    live.msg_send(bob, me, subject="from a wheel")
    modules, said = imported([*command, "--event", "PostToolUse"], {"session_id": key})
    assert "agents_room.store.news" in modules and "from a wheel" in said
    assert (site / "agents_room" / "store" / "__pycache__").is_dir()  # imported from the copy, not src/


# -- --wait: the Stop-hook wake lever ---------------------------------------------------------------


def send_from_another_process(db: Path, sender: str, to: str, subject: str) -> None:
    code = (
        "import sys; from agents_room.store import Store\n"
        "with Store.open(sys.argv[1]) as s: s.msg_send(sys.argv[2], sys.argv[3], subject=sys.argv[4])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(db), sender, to, subject], check=True, timeout=30)


def start_waiter(key: str, *args: str, tmp: Path) -> subprocess.Popen:
    payload = tmp / f"stop-{uuid.uuid4()}.json"
    payload.write_text(json.dumps(event(key, "Stop", stop_hook_active=False)))
    with payload.open() as stdin:
        return subprocess.Popen(
            [*INSTALLED, "--wait", "--poll", "0.1", *args], stdin=stdin, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )


def wait_for_marker(db: Path, session_id: str, pid: int) -> None:
    marker = db.parent / "waiters" / session_id
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text() == str(pid):
            return
        time.sleep(0.02)
    raise AssertionError("the waiter never started waiting")


@pytest.mark.slow
def test_wait_exits_2_when_another_process_sends(live: Store, repo: Path, db: Path) -> None:
    me, key = join(live, repo, "alice", "wake", lever="stop-hook")
    bob, _ = join(live, repo, "bob")
    waiter = start_waiter(key, "--timeout", "25", tmp=db.parent)
    wait_for_marker(db, me, waiter.pid)
    sent_at = time.monotonic()
    send_from_another_process(db, bob, me, "build is green")
    out, err = waiter.communicate(timeout=25)
    assert waiter.returncode == 2, err
    assert time.monotonic() - sent_at < 5
    assert out == "" and "build is green" in err and f"msg_recv with session_id={me}" in err
    assert states(live, bob, me) == ["offered"]
    # The woken turn's first hook confirms the wake; nothing is announced twice.
    proc = hook(event(key, "UserPromptSubmit"))
    assert (proc.returncode, proc.stdout) == (0, "")
    assert states(live, bob, me) == ["accepted"]


@pytest.mark.slow
def test_wait_exits_0_at_its_timeout(live: Store, repo: Path, tmp_path: Path) -> None:
    _me, key = join(live, repo, "alice", "wake", lever="stop-hook")
    started = time.monotonic()
    waiter = start_waiter(key, "--timeout", "1", tmp=tmp_path)
    out, err = waiter.communicate(timeout=20)
    assert (waiter.returncode, out, err) == (0, "", "")
    assert time.monotonic() - started >= 1


@pytest.mark.slow
def test_wait_does_not_wait_for_a_session_below_wake(live: Store, repo: Path, db: Path) -> None:
    me, key = join(live, repo, "alice", "notify", lever="stop-hook")
    bob, _ = join(live, repo, "bob")
    waiter = start_waiter(key, "--timeout", "25", tmp=db.parent)
    _out, err = waiter.communicate(timeout=20)  # well before its timeout
    assert (waiter.returncode, err) == (0, "")
    send_from_another_process(db, bob, me, "not urgent")
    assert states(live, bob, me) == ["stored"]


@pytest.mark.slow
def test_a_newer_waiter_replaces_the_older(live: Store, repo: Path, db: Path) -> None:
    me, key = join(live, repo, "alice", "wake", lever="stop-hook")
    first = start_waiter(key, "--timeout", "25", tmp=db.parent)
    wait_for_marker(db, me, first.pid)
    second = start_waiter(key, "--timeout", "2", tmp=db.parent)
    first.communicate(timeout=10)
    assert first.returncode == 0
    second.communicate(timeout=20)
    assert second.returncode == 0
    assert not (db.parent / "waiters" / me).exists()


def test_cursor_stop_hook_answers_followup_message(live: Store, repo: Path) -> None:
    me, key = join(live, repo, "alice", "notify")
    bob, _ = join(live, repo, "bob")
    payload = {"conversation_id": "c1", "hook_event_name": "stop", "status": "completed", "loop_count": 0}
    env = {"AGENTS_ROOM_HARNESS_KEY": key}
    quiet = hook(payload, "--format", "cursor", env=env)
    assert (quiet.returncode, json.loads(quiet.stdout)) == (0, {})
    live.msg_send(bob, me, subject="review my PR")
    again = hook({**payload, "loop_count": 1}, "--format", "cursor", env=env)
    assert json.loads(again.stdout) == {}  # a continuation we caused is never continued again
    proc = hook(payload, "--format", "cursor", env=env)
    assert "review my PR" in json.loads(proc.stdout)["followup_message"]
    assert json.loads(hook(payload, "--format", "cursor", env=env).stdout) == {}

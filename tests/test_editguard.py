"""The edit guard's installed command (agents_room/harnesses/editguard.py), run as each harness
runs it: a real process under a stand-in harness process (so the guard finds the harness pid
among its ancestors as it does under the real CLIs), a real store, the harness's own payloads
and answers. The store's rule itself is tested on both engines in tests/store/test_editclaim.py;
the real CLIs in tests/test_turn_edit_guard.py. A mutant of the guard (only exclusive leases
checked; only a patch's first file judged) is run against the same assertions and caught."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from harnessrig import mutant_package

import agents_room
from agents_room.harnesses import editguard
from agents_room.store import Store

ENTRY = str(Path(agents_room.__file__).parent / "editguard_entry.py")
AGENTS_ROOM = str(Path(sys.executable).with_name("agents-room"))
# Liveness by harness key scans every process on the machine: keys of this worker's own, so a
# stand-in harness of a test running beside this one on another worker never keeps A "alive".
KEY_A, KEY_B = str(uuid.uuid4()), str(uuid.uuid4())
# A stand-in harness: it stays alive (the session's pid) and runs each hook command it is sent
# through sh, as the CLIs do, answering with its exit code and output.
# With an agents-room command as its argument, it first starts that command's ``serve`` as its
# child, as a harness starts its MCP server, and waits until it listens for its edit guard.
LOOP = """
import json, os, subprocess, sys, time
serving = False
if len(sys.argv) > 1:
    serve = subprocess.Popen([sys.argv[1], "serve"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    name = "@agents-room-%d-edit-guard-%d" % (os.getuid(), os.getpid())
    while serve.poll() is None and not serving:
        with open("/proc/net/unix") as f:
            serving = any(line.split()[-1] == name for line in f if len(line.split()) > 7)
        time.sleep(0.05)
print(json.dumps({"serving": serving}), flush=True)
for line in sys.stdin:
    ask = json.loads(line)
    done = subprocess.run(["sh", "-c", ask["command"]], input=ask["stdin"], capture_output=True, text=True)
    print(json.dumps({"rc": done.returncode, "out": done.stdout, "err": done.stderr}), flush=True)
if serving:  # its server ends with it, as a harness's does
    serve.stdin.close()
    serve.wait()
"""


class Harness:
    """One stand-in harness process running the guard as ``harness`` with ``env``."""

    def __init__(self, harness: str, env: dict[str, str], entry: str = ENTRY, edits: str = "claim",
                 serve: bool = False) -> None:
        self.harness, self.entry, self.edits = harness, entry, edits
        self.proc = subprocess.Popen([sys.executable, "-c", LOOP, *([AGENTS_ROOM] if serve else [])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.serving = json.loads(self.proc.stdout.readline())["serving"]
        assert self.serving == serve, "its agents-room serve never listened"

    def run(self, payload: dict | str, *, read: bool = False, python_flags: str = "") -> tuple[int, dict | None, str]:
        flags = "--read" if read else f"--edits {self.edits}"
        command = f"{sys.executable} -I -S {python_flags} {self.entry} --harness {self.harness} {flags}"
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.proc.stdin.write(json.dumps({"command": command, "stdin": text}) + "\n")
        self.proc.stdin.flush()
        done = json.loads(self.proc.stdout.readline())
        return done["rc"], json.loads(done["out"]) if done["out"].strip() else None, done["err"]

    def run_with_env(self, payload: dict, env: dict[str, str], python_flags: str = "") -> tuple[int, dict | None, str]:
        """As :meth:`run`, the guard with ``env`` (the harness's own otherwise)."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (f"env {exports} {sys.executable} -I -S {python_flags} {self.entry} --harness {self.harness} "
                   f"--edits {self.edits}")
        self.proc.stdin.write(json.dumps({"command": command, "stdin": json.dumps(payload)}) + "\n")
        self.proc.stdin.flush()
        done = json.loads(self.proc.stdout.readline())
        return done["rc"], json.loads(done["out"]) if done["out"].strip() else None, done["err"]

    def end(self) -> None:
        """The harness exits, and its server with it."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[Harness]]]:
    repo = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "x.py").write_text("a = 1\n")
    (repo / "y.py").write_text("b = 1\n")
    runtime = tmp_path / "run"
    runtime.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AGENTS_ROOM_DB": str(tmp_path / "room.db"),
           "XDG_RUNTIME_DIR": str(runtime)}
    started: list[Harness] = []
    yield repo, env, started
    for h in started:
        h.end()


def start(started: list[Harness], harness: str, env: dict[str, str], key: str | None = None, **kw) -> Harness:
    h = Harness(harness, {**env, **({"CLAUDE_CODE_SESSION_ID": key} if key else {})}, **kw)
    started.append(h)
    return h


def claude_edit(repo: Path, key: str, path: str = "x.py", tool: str = "Edit") -> dict:
    return {"session_id": key, "hook_event_name": "PreToolUse", "cwd": str(repo), "tool_name": tool,
            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}}


def codex_patch(repo: Path, *files: str) -> dict:
    body = "".join(f"*** Update File: {f}\n@@\n-a = 1\n+a = 2\n" for f in files)
    return {"session_id": "019a0000-0000-7000-8000-00000000c0de", "hook_event_name": "PreToolUse", "cwd": str(repo),
            "tool_name": "apply_patch", "tool_input": {"command": f"*** Begin Patch\n{body}*** End Patch\n"}}


def leases(env: dict[str, str]) -> list:
    with Store.open(env["AGENTS_ROOM_DB"]) as store:
        with store.db.read() as tx:
            return tx.all("SELECT path, session_id, mode FROM leases ORDER BY path")


def sessions(env: dict[str, str]) -> dict[str, tuple]:
    with Store.open(env["AGENTS_ROOM_DB"]) as store:
        return {m.session_id: (m.harness, m.tags, m.pid) for m in store.room_who()}


def held_off(repo: Path, env: dict[str, str], started: list[Harness], entry: str = ENTRY,
             serve: bool = False) -> list[str]:
    """The scenarios a guard must hold, each as a failure line (empty: all hold); ``serve``:
    each harness with its agents-room serve beside it, which the guard asks."""
    wrong = []
    a = start(started, "claude-code", env, KEY_A, entry=entry, serve=serve)
    b = start(started, "claude-code", env, KEY_B, entry=entry, serve=serve)
    c = start(started, "codex", env, entry=entry, serve=serve)
    rc, out, _ = a.run(claude_edit(repo, KEY_A))
    if rc != 0 or out is not None:
        wrong.append(f"A's first edit answered {rc} {out}")
    # a shared lease of y.py, taken by the model of a third session itself
    with Store.open(env["AGENTS_ROOM_DB"]) as store:
        other = store.room_join(cwd=str(repo), pid=None, label="reviewer").session_id
        store.lease_claim(other, "y.py", mode="shared")
    _, out, _ = b.run(claude_edit(repo, KEY_B, str(repo / "y.py"), tool="Write"))
    if not (out and out["hookSpecificOutput"]["permissionDecision"] == "deny" and "reviewer" in
            out["hookSpecificOutput"]["permissionDecisionReason"]):
        wrong.append(f"B's write of y.py under a shared lease: {out}")
    # a Codex patch of a free file first, then x.py (held by A): denied whole
    _, out, _ = c.run(codex_patch(repo, "z.py", "x.py"))
    if not (out and out["hookSpecificOutput"]["permissionDecision"] == "deny"):
        wrong.append(f"Codex's patch of z.py and x.py (held): {out}")
    if any(path.endswith("/z.py") for path, _, _ in leases(env)):
        wrong.append("z.py was claimed by a denied patch")
    return wrong


@pytest.mark.parametrize("serve", [False, True], ids=["in-the-guard", "asked-its-server"])
def test_an_edit_claims_another_sessions_edit_is_denied_naming_the_holder_and_freed_when_it_ends(world, serve) -> None:
    repo, env, started = world
    a = start(started, "claude-code", env, KEY_A, serve=serve)
    b = start(started, "gemini", env, serve=serve)
    rc, out, err = a.run(claude_edit(repo, KEY_A))
    assert (rc, out, err) == (0, None, "")
    [(path, holder, mode)] = leases(env)
    assert path == str(repo / "x.py") and mode == "exclusive"
    harness, tags, pid = sessions(env)[holder]
    assert harness == "claude-code" and tags == ["edit-guard"] and pid == a.proc.pid  # joined on its behalf

    payload = {"session_id": "gemini-session-1", "hook_event_name": "BeforeTool", "cwd": str(repo),
               "tool_name": "replace", "tool_input": {"file_path": "x.py", "old_string": "a", "new_string": "c"}}
    rc, out, _ = b.run(payload)
    assert rc == 0 and out["decision"] == "deny", out
    for words in (str(repo / "x.py"), holder, "claude-code", "exclusive", "until",
                  f"msg_send to 'file:{repo / 'x.py'}'", "pick other work", "untouched"):
        assert words in out["reason"], (words, out["reason"])
    # A renews with each edit; B's session was joined too, holding nothing
    assert a.run(claude_edit(repo, KEY_A))[1] is None
    assert [h for _, h, _ in leases(env)] == [holder]
    a.end()  # A's session ends: its harness process is gone
    rc, out, _ = b.run(payload)
    assert (rc, out) == (0, None)
    [(_, now_holder, _)] = leases(env)
    assert sessions(env)[now_holder][0] == "gemini" and holder not in sessions(env)


def test_every_scenario_holds_and_a_mutant_of_the_guard_is_caught(world, tmp_path: Path) -> None:
    repo, env, started = world
    assert held_off(repo, env, started) == []
    for pattern, broken in (
        # only exclusive leases checked
        (r"if h\.session_id != me\.id\]", "if h.session_id != me.id and h.mode == 'exclusive']"),
        # only a patch's first file judged
        (r"    found = list\(dict\.fromkeys\(p for p in found if p\)\)\n",
         "    found = list(dict.fromkeys(p for p in found if p))[:1]\n"),
    ):
        folder = mutant_package(tmp_path / pattern[:12].replace("\\", "").replace("(", ""), pattern, broken)
        (repo / "y.py").write_text("b = 1\n")
        fresh = dict(env, AGENTS_ROOM_DB=str(tmp_path / f"mutant-{len(started)}.db"))
        wrong = held_off(repo, fresh, started, entry=str(folder / "agents_room" / "editguard_entry.py"))
        assert wrong, f"the mutant {broken!r} held every scenario: the tests cannot tell it from the guard"


def test_check_mode_denies_without_claiming_and_reads_make_baselines_for_drift(world) -> None:
    repo, env, started = world
    a = start(started, "claude-code", env, KEY_A)
    b = start(started, "claude-code", env, KEY_B, edits="check")
    read = {"session_id": KEY_B, "hook_event_name": "PostToolUse", "cwd": str(repo), "tool_name": "Read",
            "tool_input": {"file_path": str(repo / "x.py")}}
    assert b.run(read, read=True)[:2] == (0, None)
    assert b.run(claude_edit(repo, KEY_B, "y.py"))[1] is None and leases(env) == []  # check: never claims
    assert a.run(claude_edit(repo, KEY_A))[1] is None
    (repo / "x.py").write_text("a = 2\n")  # A's edit lands
    with Store.open(env["AGENTS_ROOM_DB"]) as store, store.db.write() as tx:
        tx.execute("DELETE FROM leases")  # A's lease gone (as at its expiry): the drift alone stands
    _, out, _ = b.run(claude_edit(repo, KEY_B))
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert "changed on disk since you read it" in reason, reason


def test_the_guard_fails_open_and_says_so_once_per_session(world, tmp_path: Path) -> None:
    repo, env, started = world
    (tmp_path / "blocked").mkdir()
    broken_env = dict(env, AGENTS_ROOM_DB=str(tmp_path / "blocked"))  # a folder: no store can open there
    a = start(started, "claude-code", broken_env, KEY_A)
    rc, out, err = a.run(claude_edit(repo, KEY_A))
    assert rc == 0 and "not working" in out["systemMessage"] and "lease_claim it yourself" in \
        out["hookSpecificOutput"]["additionalContext"] and "edit guard" in err
    assert a.run(claude_edit(repo, KEY_A))[1] is None  # told once
    b = start(started, "claude-code", env, KEY_B)
    rc, out, _ = b.run("{not json")
    assert rc == 0 and "not a JSON object" in out["systemMessage"]
    rc, out, _ = b.run({**claude_edit(repo, KEY_B), "session_id": "s2", "tool_name": "Teleport"})
    assert rc == 0 and "Teleport" in out["systemMessage"]
    # a path outside any repository is not judged, and not a failure
    outside = tmp_path / "scratch.txt"
    assert b.run({**claude_edit(repo, KEY_B), "session_id": "s3", "tool_input": {"file_path": str(outside)}})[1] is None
    assert leases(env) == []


def test_patch_paths_names_every_file_a_patch_writes() -> None:
    patch = ("*** Begin Patch\n*** Add File: new.py\n+x\n*** Update File: src/a.py\n*** Move to: src/b.py\n@@\n-1\n+2\n"
             "*** Delete File: old.py\n*** Update File: src/a.py\n*** End Patch\n")
    assert editguard.patch_paths(patch) == ["new.py", "src/a.py", "src/b.py", "old.py"]
    with pytest.raises(editguard.Unusable, match="naming no file"):
        editguard.patch_paths("*** Begin Patch\n*** End Patch\n")
    assert editguard.matcher("claude-code") == "Edit|Write|MultiEdit|NotebookEdit"
    assert editguard.matcher("gemini", read=True) == "read_file|read_many_files"


def test_the_read_only_look_allows_only_files_the_session_holds_all_of(world) -> None:
    repo, env, started = world
    c = start(started, "codex", env)
    assert c.run(codex_patch(repo, "x.py"))[1] is None  # claimed (the whole rule)
    assert c.run(codex_patch(repo, "x.py"))[1] is None  # held, renewed a moment ago: the read-only look
    with Store.open(env["AGENTS_ROOM_DB"]) as store:
        other = store.room_join(cwd=str(repo), pid=None, label="owner").session_id
        store.lease_claim(other, "y.py")
    _, out, _ = c.run(codex_patch(repo, "x.py", "y.py"))  # one held file of its own is not all of them
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and "owner" in \
        out["hookSpecificOutput"]["permissionDecisionReason"]


def test_on_postgresql_an_edit_claims_and_another_sessions_is_denied(world, pg_url: str) -> None:
    repo, env, started = world
    env = dict(env, AGENTS_ROOM_DB=pg_url)  # the installed command starts without site: the driver is found
    a = start(started, "claude-code", env, KEY_A)
    b = start(started, "codex", env)
    assert a.run(claude_edit(repo, KEY_A)) == (0, None, "")
    _, out, _ = b.run(codex_patch(repo, "x.py"))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny" and "harness claude-code" in \
        out["hookSpecificOutput"]["permissionDecisionReason"]
    assert a.run(claude_edit(repo, KEY_A))[1] is None  # renewed through the whole rule (no read-only look here)


def test_a_read_of_unchanged_bytes_keeps_the_baseline_and_a_changed_file_gets_a_new_one(world) -> None:
    repo, env, started = world
    b = start(started, "claude-code", env, KEY_B)
    read = {"session_id": KEY_B, "hook_event_name": "PostToolUse", "cwd": str(repo), "tool_name": "Read",
            "tool_input": {"file_path": str(repo / "x.py")}}

    def baseline() -> tuple:
        with Store.open(env["AGENTS_ROOM_DB"]) as store, store.db.read() as tx:
            return tx.one("SELECT hash, read_seq FROM reads")

    b.run(read, read=True)
    first = baseline()
    b.run(read, read=True)  # the same bytes: the read-only look, nothing written
    assert baseline() == first
    (repo / "x.py").write_text("a = 9\n")
    b.run(read, read=True)
    assert baseline()[0] != first[0] and baseline()[1] > first[1]


# -- asked through the agent's own server (agents_room/harnesses/editguard_serve.py) -------------


def test_the_guard_asks_its_agents_server_which_holds_every_rule(world) -> None:
    """Each stand-in harness runs its agents-room serve as its child, as the real CLIs do: every
    scenario holds, and the guard's own process never imports the store (the server judged)."""
    repo, env, started = world
    assert held_off(repo, env, started, serve=True) == []
    a = started[0]
    rc, out, err = a.run(claude_edit(repo, KEY_A, "y.py"), python_flags="-X importtime")
    imported = {line.split("|")[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
    assert rc == 0 and out["hookSpecificOutput"]["permissionDecision"] == "deny" and "reviewer" in \
        out["hookSpecificOutput"]["permissionDecisionReason"]
    assert "agents_room.harnesses.editguard" in imported and "agents_room.store" not in imported, sorted(imported)


def test_a_server_of_another_store_leaves_the_guard_to_judge_itself(world, tmp_path: Path) -> None:
    repo, env, started = world
    other = dict(env, AGENTS_ROOM_DB=str(tmp_path / "other.db"))
    a = start(started, "claude-code", other, KEY_A, serve=True)  # its server serves other.db ...
    rc, out, err = a.run_with_env(claude_edit(repo, KEY_A), env, python_flags="-X importtime")  # ... its guard room.db
    assert (rc, out) == (0, None) and [p for p, _, _ in leases(env)] == [str(repo / "x.py")]
    assert " agents_room.store\n" in err.replace("|", "\n")  # judged in the guard's own process
    with Store.open(other["AGENTS_ROOM_DB"]) as store, store.db.read() as tx:
        assert tx.all("SELECT path FROM leases") == []


# Another user's processes: the system's Python (this one may live under root's home folder).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
                    reason="another user's process is started as nobody, with the system's Python")
def test_neither_end_trusts_another_users_socket(world) -> None:
    """The socket is in the abstract namespace, which has no file permissions: a process of
    another user that takes the name first is never believed, and one that connects to an
    agent's server gets nothing and changes nothing."""
    repo, env, started = world
    a = start(started, "claude-code", env, KEY_A)
    impostor = subprocess.Popen(
        [SYSTEM_PYTHON, "-I", "-S", "-c", IMPOSTOR, f"agents-room-{os.getuid()}-edit-guard-{a.proc.pid}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=lambda: os.setuid(65534))
    try:
        assert impostor.stdout.readline().strip() == "listening"
        assert a.run(claude_edit(repo, KEY_A)) == (0, None, "")  # the impostor's "deny" is never read
        assert [p for p, _, _ in leases(env)] == [str(repo / "x.py")]
    finally:
        impostor.kill()
        impostor.wait()
        impostor.stdout.close()
    b = start(started, "claude-code", env, KEY_B, serve=True)
    request = json.dumps({"harness": "claude-code", "edits": "claim", "read": False, "db": env["AGENTS_ROOM_DB"],
                          "data": claude_edit(repo, KEY_B, "y.py"), "keys": [KEY_B], "ancestors": [b.proc.pid],
                          "cwd": str(repo)})
    asked = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", CLIENT, f"agents-room-{os.getuid()}-edit-guard-{b.proc.pid}",
                            request], capture_output=True, text=True, preexec_fn=lambda: os.setuid(65534), timeout=60)
    assert asked.returncode == 0 and asked.stdout == "answer: ''\n", asked
    assert [p for p, _, _ in leases(env)] == [str(repo / "x.py")]  # y.py never claimed


IMPOSTOR = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1]); s.listen(4)  # the abstract name (a NUL cannot be in argv)
print("listening", flush=True)
deny = {"answer": {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                          "permissionDecisionReason": "impostor"}}}
while True:
    c, _ = s.accept()
    c.recv(1 << 20)
    c.sendall(json.dumps(deny).encode())
    c.close()
"""
CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0" + sys.argv[1])
got = b""
try:  # the server may close before the request is all sent: nothing answered either way
    s.sendall(sys.argv[2].encode())
    s.shutdown(socket.SHUT_WR)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
except OSError:
    pass
print("answer:", repr(got.decode()))
"""

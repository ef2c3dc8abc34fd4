"""The Claude Code channel, driven by a raw newline-delimited JSON-RPC client over a real
``agents-room serve`` process that behaves like Claude Code: probe with ``server/discover``,
fall back to ``initialize``, then expect ``notifications/claude/channel`` pushes."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Store

pytestmark = pytest.mark.slow

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
MODERN = "2026-07-28"


class RawClient:
    """What Claude Code does on the wire, and nothing more."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [AGENTS_ROOM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=cwd,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        self.next_id = 0
        self.notifications: list[tuple[float, dict[str, Any]]] = []

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.put(json.loads(line))

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr.extend(self.proc.stderr)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message.get("id") == rid:
                return message
            self.notifications.append((time.monotonic(), message))

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        result = reply["result"]
        assert not result.get("isError"), result
        return result["structuredContent"]

    def notification(self, method: str, timeout: float) -> tuple[float, dict[str, Any]]:
        for i, (at, message) in enumerate(self.notifications):
            if message.get("method") == method:
                del self.notifications[i]
                return at, message
        deadline = time.monotonic() + timeout
        while True:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message.get("method") == method:
                return time.monotonic(), message
            self.notifications.append((time.monotonic(), message))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


def handshake(client: RawClient, *, probe_first: bool = True) -> dict[str, Any]:
    if probe_first:
        probe_and_expect_failure(client)
    init = client.request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.1"},
    })
    client.send({"method": "notifications/initialized"})
    return init["result"]


def probe_and_expect_failure(client: RawClient) -> None:
    probe = client.request("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2.1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }})
    assert "error" in probe, f"the probe must fail so the client falls back to initialize: {probe}"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "room.db"


def server_env(db: Path, key: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "AGENTS_ROOM_DB": str(db), "CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": key, **extra}


def send_from_another_process(db: Path, sender: str, to: str, subject: str) -> float:
    """Send from a fresh process; returns when the send committed (CLOCK_MONOTONIC is one
    clock for every process on the host), so timings exclude the sender's start-up."""
    code = (
        "import sys, time; from agents_room.store import Store\n"
        "with Store.open(sys.argv[1]) as s: s.msg_send(sys.argv[2], sys.argv[3], subject=sys.argv[4])\n"
        "print(time.monotonic())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(db), sender, to, subject], check=True, timeout=30,
                          capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def state_of(db: Path, sender: str, recipient: str) -> str:
    with Store.open(db) as s:
        return s.msg_sent(sender)[0].states[recipient]


def eventually(check, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_channel_push_within_a_second_of_another_process_send(db: Path, repo: Path) -> None:
    key = str(uuid.uuid4())
    client = RawClient(server_env(db, key, AGENTS_ROOM_CHANNEL="1"), repo)
    try:
        init = handshake(client)
        assert init["protocolVersion"] == "2025-11-25"
        assert init["capabilities"]["experimental"] == {"claude/channel": {}}

        joined = client.tool("room_join", label="alice", autonomy="wake")
        me = joined["session_id"]
        assert joined["autonomy"] == "wake"
        with Store.open(db) as s:
            bob = s.room_join(cwd=str(repo), pid=None, label="bob").session_id
            assert s.hook_session([key]).wake_lever == "claude-channel"

        sent_at = send_from_another_process(db, bob, me, "tests are red on main")
        at, push = client.notification("notifications/claude/channel", timeout=10)
        assert at - sent_at < 1.0, f"push took {at - sent_at:.2f}s after the send committed"
        params = push["params"]
        assert "tests are red on main" in params["content"] and "msg_recv" in params["content"]
        assert params["meta"]["session_id"] == me and params["meta"]["senders"] == "bob"
        assert all(k.replace("_", "").isalnum() and isinstance(v, str) for k, v in params["meta"].items())
        assert state_of(db, bob, me) == "offered"

        # Nothing twice: a quiet store gets no second push within the retry window.
        with pytest.raises(queue.Empty):
            client.notification("notifications/claude/channel", timeout=1.0)

        # The turn came: the session's next tool call confirms the offer.
        client.tool("note_read", session_id=me, path=str(repo / "README.md"))
        eventually(lambda: state_of(db, bob, me) == "accepted")
        assert [m["subject"] for m in client.tool("msg_recv", session_id=me)["messages"]] == ["tests are red on main"]
    finally:
        client.close()


def test_no_push_below_wake_and_the_hooks_still_tell(db: Path, repo: Path) -> None:
    key = str(uuid.uuid4())
    client = RawClient(server_env(db, key, AGENTS_ROOM_CHANNEL="1"), repo)
    try:
        handshake(client)
        me = client.tool("room_join", label="alice")["session_id"]  # notify
        with Store.open(db) as s:
            bob = s.room_join(cwd=str(repo), pid=None, label="bob").session_id
        send_from_another_process(db, bob, me, "fyi")
        with pytest.raises(queue.Empty):
            client.notification("notifications/claude/channel", timeout=1.5)
        assert state_of(db, bob, me) == "stored"
    finally:
        client.close()


def test_without_the_switch_the_server_is_dual_era_and_records_no_channel(db: Path, repo: Path) -> None:
    key = str(uuid.uuid4())
    client = RawClient(server_env(db, key), repo)
    try:
        probe = client.request("server/discover", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "x", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }})
        assert "result" in probe  # the SDK's default loop answers the modern probe
    finally:
        client.close()


def test_the_command_lever_runs_in_a_plain_stdio_server(db: Path, repo: Path, tmp_path: Path) -> None:
    woken = tmp_path / "woken.txt"
    command = f"sh -c 'cat > {woken}'"
    client = RawClient(server_env(db, str(uuid.uuid4()), AGENTS_ROOM_WAKE_COMMAND=command), repo)
    try:
        init = handshake(client, probe_first=False)  # a plain server: any client, handshake era
        assert "experimental" not in init["capabilities"]
        me = client.tool("room_join", label="alice", autonomy="wake")["session_id"]
        with Store.open(db) as s:
            bob = s.room_join(cwd=str(repo), pid=None, label="bob").session_id
        send_from_another_process(db, bob, me, "deploy finished")
        eventually(lambda: woken.exists() and "deploy finished" in woken.read_text())
        eventually(lambda: state_of(db, bob, me) == "accepted")
    finally:
        client.close()

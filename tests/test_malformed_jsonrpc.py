"""Every malformed JSON-RPC request over stdio gets a JSON-RPC error answer (parse error
-32700, invalid request -32600) with its id, where the SDK's reader drops it and its caller
waits for its own timeout (agents_room/server/stdio.py). A real ``agents-room serve``
process, raw lines on its stdin."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

AGENTS_ROOM = str(Path(sys.executable).parent / "agents-room")
DEEP = '{"jsonrpc":"2.0","id":12,"method":"tools/list","params":{"a":' + "[" * 200 + "]" * 200 + "}}"
LINES: list[tuple[str, Any, int]] = [
    ('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}', 11, -32700),
    (DEEP, 12, -32700),
    ('{"jsonrpc":"2.0","id":13}', 13, -32600),
    ('{"jsonrpc":"2.0","id":"s14","method":5}', "s14", -32600),
    ("not json at all", None, -32700),
]


def test_each_malformed_request_is_answered_and_the_server_goes_on(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTS_ROOM_DB": str(tmp_path / "store" / "room.db")}
    proc = subprocess.Popen([AGENTS_ROOM, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    answers: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answers.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def next_answer() -> dict[str, Any]:
        return answers.get(timeout=60)  # the event itself; a dropped line never comes

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert next_answer()["id"] == 1
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for line, rid, code in LINES:
            send(line)
            got = next_answer()
            assert (got.get("id"), got.get("error", {}).get("code")) == (rid, code), (line[:60], got)
        send('{"jsonrpc":"2.0","id":99,"method":"tools/list"}')  # and the server still serves
        listed = next_answer()
        assert listed["id"] == 99 and any(t["name"] == "room_join" for t in listed["result"]["tools"])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()

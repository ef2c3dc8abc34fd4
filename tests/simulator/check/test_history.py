"""History files: written a record at a time, read back tolerating the one torn line a
kill can leave, merged in (time, process, index) order."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.check.history import (
    TornHistory, Writer, merge, outcome_of, pairs, process_id, read, read_folder, settle_dangling, write_merged,
)


def test_records_have_the_documented_fields_and_count_their_index(tmp_path: Path) -> None:
    w = Writer(tmp_path, 3, "a03")
    w.write("invoke", "room_join", {"label": "a03"})
    w.session = "0123456789abcdef"
    w.write("ok", "room_join", {"session_id": "0123456789abcdef"})
    w.write("invoke", "lease_claim", {"path": "/x"})
    w.write("fail", "lease_claim", {"path": "/x"}, "store_busy", extra={"intended": 5})
    w.close()
    records = read(tmp_path / "p3.jsonl")
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert [r["type"] for r in records] == ["invoke", "ok", "invoke", "fail"]
    assert records[0]["session"] is None and records[1]["session"] == "0123456789abcdef"
    assert records[3]["error"] == "store_busy" and records[3]["intended"] == 5
    assert set(records[0]) == {"index", "time", "wall", "process", "agent", "session", "type", "f", "value", "error"}
    assert all(r["process"] == 3 and r["agent"] == "a03" for r in records)
    assert records[0]["time"] <= records[3]["time"] and abs(records[0]["wall"] - time.time()) < 60


def test_a_torn_last_line_is_dropped(tmp_path: Path) -> None:
    w = Writer(tmp_path, 0, "a00")
    w.write("invoke", "msg_recv", {"limit": 5})
    w.close()
    path = tmp_path / "p0.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"index":1,"time":12,"wall":1.5,"pro')
    assert [r["f"] for r in read(path)] == ["msg_recv"]
    path.write_bytes(whole + b'{"index":1,"time":12,"wall":1.5,"pro\n')  # torn, but its newline got in
    assert len(read(path)) == 1


def test_a_broken_line_before_the_last_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "p0.jsonl"
    good = json.dumps({"index": 1, "time": 2, "process": 0})
    path.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(TornHistory, match="line 2 is not JSON"):
        read(path)


def test_a_sigkilled_writer_leaves_a_readable_history(tmp_path: Path) -> None:
    """A real process writing as fast as it can, killed mid-stream."""
    script = (
        "import sys; from pathlib import Path; from sim.check.history import Writer\n"
        "w = Writer(Path(sys.argv[1]), 7, 'a07'); print('go', flush=True)\n"
        "while True:\n"
        "    w.write('invoke', 'msg_send', {'to': '*', 'subject': 'x' * 3000})\n"
        "    w.write('ok', 'msg_send', {'message_id': w.index})\n"
    )
    with subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        # killed once it has written a few dozen records, however long a loaded machine takes
        deadline = time.monotonic() + 60
        while (tmp_path / "p7.jsonl").read_bytes().count(b"\n") < 40:
            assert time.monotonic() < deadline and proc.poll() is None, "the writer wrote too little"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    records = read(tmp_path / "p7.jsonl")
    assert len(records) > 10
    assert [r["index"] for r in records] == list(range(len(records)))
    added = settle_dangling(records)
    if records[-1 - len(added)]["type"] == "invoke":  # killed between invoke and ok
        assert len(added) == 1 and added[0]["type"] == "info" and added[0]["error"] == "killed"
    assert all(r["type"] != "invoke" for r in records[-1:])


def test_merge_orders_by_time_then_process_then_index(tmp_path: Path) -> None:
    def rec(process: int, index: int, t: int) -> dict:
        return {"index": index, "time": t, "process": process, "type": "invoke", "f": "room_who"}

    a = [rec(2, 0, 10), rec(2, 1, 30), rec(2, 2, 30)]
    b = [rec(1, 0, 20), rec(1, 1, 30)]
    merged = merge([a, b])
    assert [(r["time"], r["process"], r["index"]) for r in merged] == [
        (10, 2, 0), (20, 1, 0), (30, 1, 1), (30, 2, 1), (30, 2, 2)]
    for name, group in (("p2.jsonl", a), ("p1.jsonl", b)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in group))
    assert read_folder(tmp_path) == merged
    for name in ("history.jsonl", "history.jsonl.gz"):
        assert write_merged(merged, tmp_path / name)  # it reads back as written
        assert read(tmp_path / name) == merged


def test_pairs_and_dangling_invokes() -> None:
    records = [
        {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "lease_claim"},
        {"index": 0, "time": 2, "process": 1, "type": "invoke", "f": "msg_recv"},
        {"index": 1, "time": 3, "process": 0, "type": "ok", "f": "lease_claim"},
        {"index": 1, "time": 4, "process": 1, "type": "ok", "f": "msg_recv"},
        {"index": 2, "time": 5, "process": 1, "type": "invoke", "f": "msg_send"},
    ]
    assert [(i["f"], d["time"]) for i, d in pairs(records)] == [("lease_claim", 3), ("msg_recv", 4)]
    added = settle_dangling(records)
    assert [(r["process"], r["index"], r["type"], r["error"]) for r in added] == [(1, 3, "info", "killed")]
    assert records[-1] is added[0]
    assert [(i["f"], d["type"]) for i, d in pairs(records)][-1] == ("msg_send", "info")


def test_error_codes_map_to_fail_or_info_as_documented() -> None:
    for code in ("invalid_argument", "unknown_session", "lease_not_held", "not_recipient", "store_busy"):
        assert outcome_of(code) == "fail"
    for code in ("store_error", "timeout", "lost", "killed", "something_new"):
        assert outcome_of(code) == "info"
    assert [process_id(3, 24, g) for g in range(3)] == [3, 27, 51]

"""The client history (``docs/history.md``): one JSONL file per agent OS process, written a
record at a time so a SIGKILL loses at most the line being written, read back tolerating
exactly that torn last line, and merged into one time-ordered list.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

Outcome = Literal["invoke", "ok", "fail", "info"]
Record = dict[str, Any]

# Store errors that guarantee nothing changed: ``fail``. Anything else (store_error, a
# client timeout, a lost server, a kill) may have happened: ``info``.
DEFINITE = frozenset({"invalid_argument", "unknown_session", "lease_not_held", "not_recipient", "store_busy"})


def outcome_of(code: str) -> Literal["fail", "info"]:
    return "fail" if code in DEFINITE else "info"


def process_id(agent_no: int, n_agents: int, generation: int) -> int:
    """Jepsen process id: a retired process's agent continues under the next generation's id."""
    return agent_no + n_agents * generation


class Writer:
    """Appends the records of one process to ``<dir>/p<process>.jsonl``.

    One ``os.write`` per record on an ``O_APPEND`` descriptor: the line reaches the kernel
    before the operation proceeds, so a killed process leaves its invoke behind."""

    def __init__(self, folder: Path, process: int, agent: str) -> None:
        self.path = Path(folder) / f"p{process}.jsonl"
        self.process = process
        self.agent = agent
        self.index = 0
        self.session: str | None = None
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(
        self, type_: Outcome, f: str, value: Any, error: str | None = None, *, extra: dict[str, Any] | None = None,
    ) -> Record:
        record: Record = {
            "index": self.index, "time": time.monotonic_ns(), "wall": time.time(), "process": self.process,
            "agent": self.agent, "session": self.session, "type": type_, "f": f, "value": value, "error": error,
        }
        if extra:
            record.update(extra)
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())
        self.index += 1
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class TornHistory(ValueError):
    """A history line other than the last one does not parse: not a kill, a real corruption."""


def read(path: str | Path) -> list[Record]:
    """The records of one process file, or of the merged history (``history.jsonl.gz``, also
    found when ``history.jsonl`` is asked for). A last line without its newline, or that does
    not parse, is the record a kill interrupted and is dropped; anything broken before it raises."""
    path = Path(path)
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    if path.suffix == ".gz":
        import gzip

        data = gzip.decompress(path.read_bytes())
    else:
        data = path.read_bytes()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail is b"" when the file ends with a newline
    records = []
    for n, line in enumerate(complete):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if n == len(complete) - 1 and not tail:
                break  # a torn write that still got a newline in (should not happen, tolerated)
            raise TornHistory(f"{path}: line {n + 1} is not JSON: {line[:80]!r}") from None
    return records


def sort_key(record: Record) -> tuple[int, int, int]:
    return record["time"], record["process"], record["index"]


def merge(groups: Iterable[list[Record]]) -> list[Record]:
    """All processes' records in one list ordered by (time, process, index)."""
    out = [r for g in groups for r in g]
    out.sort(key=sort_key)
    return out


def read_folder(folder: str | Path) -> list[Record]:
    return merge(read(p) for p in sorted(Path(folder).glob("p*.jsonl")))


def settle_dangling(records: list[Record], error: str = "killed") -> list[Record]:
    """Complete every invoke that has no completion (its process died mid-operation) with an
    ``info`` carrying ``error``, timed at the process's last record. Returns the new records
    (already merged into ``records``, which stays ordered)."""
    open_ops: dict[int, Record] = {}
    last_time: dict[int, int] = {}
    for r in records:
        last_time[r["process"]] = max(last_time.get(r["process"], 0), r["time"])
        if r["type"] == "invoke":
            open_ops[r["process"]] = r
        else:
            open_ops.pop(r["process"], None)
    added = []
    for proc, inv in open_ops.items():
        added.append({
            **inv, "index": inv["index"] + 1, "time": last_time[proc], "type": "info", "error": error,
        })
    if added:
        records.extend(added)
        records.sort(key=sort_key)
    return added


def pairs(records: Iterable[Record]) -> list[tuple[Record, Record]]:
    """(invoke, completion) of every completed operation, in completion order."""
    pending: dict[int, Record] = {}
    out = []
    for r in records:
        if r["type"] == "invoke":
            pending[r["process"]] = r
        else:
            inv = pending.pop(r["process"], None)
            if inv is not None:
                out.append((inv, r))
    return out


def write_merged(records: list[Record], path: str | Path) -> bool:
    """One JSON record a line; gzip-compressed when ``path`` ends in ``.gz`` (a run's merged
    history is read back only by programs: compressed, it is about a tenth of the size).
    True when the file reads back byte for byte as written (so copies of it may go)."""
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    path = Path(path)
    if path.suffix == ".gz":
        import gzip

        path.write_bytes(gzip.compress(data, compresslevel=3, mtime=0))
        return gzip.decompress(path.read_bytes()) == data
    path.write_bytes(data)
    return path.read_bytes() == data

"""History records (docs/history.md) paired into operations: one invoke and its completion.

An operation is a closed interval [invoke, completion] on the wall clock (``wall`` compares
with the events' ``at``). An invoke that never completed (the process was killed before it
could write) counts as ``info``: it may or may not have happened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from .model import Problem, stamp

Outcome = Literal["ok", "fail", "info"]
REQUIRED = ("index", "time", "wall", "process", "type", "f")
TYPES = frozenset({"invoke", "ok", "fail", "info"})
NUMBERS = frozenset({int, float})


@dataclass(frozen=True, slots=True)
class Op:
    process: int
    agent: str
    session: str | None
    f: str
    args: dict[str, Any]
    path: str | None  # the path argument as the store normalises it (see ``normal_path``)
    outcome: Outcome
    result: dict[str, Any] | None  # the ok value
    error: str | None
    start: float  # invoke wall
    end: float | None  # completion wall; None when the op never completed
    index: int  # the invoke's index in its process's file
    completed: bool

    def describe(self) -> str:
        session = self.session or "(no session)"
        done = f"{self.outcome} at {stamp(self.end)}" if self.end is not None else "never completed"
        return f"{self.f} by {self.agent} (process {self.process}, session {session}), invoked {stamp(self.start)}, {done}"


def normal_path(args: Any) -> str | None:
    """``abspath`` of an absolute path argument, as the store stores it. A relative one is
    kept as given: the history does not carry the session's cwd."""
    p = args.get("path") if isinstance(args, dict) else None
    if not isinstance(p, str):
        return None
    if p.startswith("/") and ("/." in p or "//" in p or p.endswith("/")):
        normal = os.path.normpath(p)
        # a trailing "/" names a directory lease: the store keeps it (one "/", never on the root twice)
        return normal + "/" if p.endswith("/") and normal != "/" else normal
    return p


def validate(record: Any, position: int) -> None:
    """Raise ``ValueError`` naming the first missing or malformed field of one record."""
    if not isinstance(record, dict):
        raise ValueError(f"history record {position}: must be an object, got {type(record).__name__}")
    for name in REQUIRED:
        if name not in record:
            raise ValueError(f"history record {position}: missing field {name!r}")
    if record["type"] not in TYPES:
        raise ValueError(f"history record {position}: field 'type' must be one of {sorted(TYPES)}, "
                         f"got {record['type']!r}")
    for name in ("time", "wall"):
        if isinstance(record[name], bool) or not isinstance(record[name], int | float):
            raise ValueError(f"history record {position}: field {name!r} must be a number, got {record[name]!r}")


def pair(history: list[dict[str, Any]]) -> tuple[list[Op], list[Problem]]:
    """Operations in invoke order, and the problems of the history itself (a process that
    went on after an ``info``, a completion without an invoke, two completions)."""
    for position, r in enumerate(history):
        try:  # the fast path; validate() names what is wrong
            good = r["type"] in TYPES and type(r["wall"]) in NUMBERS and type(r["time"]) in NUMBERS and \
                "index" in r and "process" in r and "f" in r
        except (KeyError, TypeError):
            good = False
        if not good:
            validate(r, position)
    records = history
    key = [(r["time"], r["process"], r["index"]) for r in records]
    if any(key[i] > key[i + 1] for i in range(len(key) - 1)):
        order = sorted(range(len(records)), key=key.__getitem__)
        records = [records[i] for i in order]
    pending: dict[int, dict[str, Any]] = {}
    retired: dict[int, Op] = {}
    last: dict[int, Op] = {}
    ops: list[Op] = []
    problems: list[Problem] = []
    for r in records:
        process, kind = r["process"], r["type"]
        if kind == "invoke":
            if process in pending:
                problems.append(_problem(r, f"process {process} invoked {r['f']} while {pending[process]['f']} "
                                            f"(index {pending[process]['index']}) had not completed"))
                ops.append(_op(pending.pop(process), None))
            if process in retired:
                problems.append(_problem(r, f"process {process} invoked {r['f']} after its op "
                                            f"{retired[process].f} ended info: a retired process never invokes again"))
            pending[process] = r
            continue
        invoke = pending.pop(process, None)
        if invoke is None:
            prior = last.get(process)
            both = f"; its last op {prior.f} already ended {prior.outcome}" if prior else ""
            problems.append(_problem(r, f"process {process} recorded {kind} for {r['f']} with no invoke pending"
                                        f"{both} (an op settled two ways)"))
            continue
        if invoke["f"] != r["f"]:
            problems.append(_problem(r, f"process {process} completed {r['f']} but had invoked {invoke['f']}"))
        op = _op(invoke, r)
        ops.append(op)
        last[process] = op
        if kind == "info":
            retired[process] = op
    ops.extend(_op(r, None) for r in pending.values())
    ops.sort(key=lambda o: (o.start, o.process, o.index))
    return ops, problems


def _op(invoke: dict[str, Any], done: dict[str, Any] | None) -> Op:
    session = invoke.get("session") or (done or {}).get("session")
    args = invoke.get("value") or {}
    path = normal_path(args)
    if done is None:
        return Op(invoke["process"], str(invoke.get("agent")), session, invoke["f"], args, path, "info", None, None,
                  float(invoke["wall"]), None, invoke["index"], False)
    outcome = done["type"]
    result = done.get("value") if outcome == "ok" else None
    if invoke["f"] == "room_join" and isinstance(result, dict) and result.get("session_id"):
        session = result["session_id"]
    return Op(invoke["process"], str(invoke.get("agent")), session, invoke["f"], args, path, outcome,
              result if isinstance(result, dict) else ({} if outcome == "ok" else None), done.get("error"),
              float(invoke["wall"]), float(done["wall"]), invoke["index"], True)


def _problem(record: dict[str, Any], message: str) -> Problem:
    return Problem("history-events", message, {"process": record["process"], "index": record["index"],
                                                "wall": record["wall"], "agent": record.get("agent")})

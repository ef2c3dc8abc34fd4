"""The black-box second opinion on lease exclusion: the clients' history alone, no events.

A client knows it holds a lease from the moment its claim is answered ``ok`` until the
earliest of: its release (or leave) being sent, the expiry the store told it (``expires_at``
of the claim or of its latest renewal, on the store's clock, which is the host's wall clock),
or its process retiring (an op that ended ``info``, or never completed). Each window is thus
a part of the time the store really granted the lease; if two such windows on one path
overlap while one of them is exclusive, two sessions held the path at once, whatever the
events table says. The check is deliberately conservative: it can miss an overlap, never
invent one (on one host's clock).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .identity import Spellings
from .model import Problem, stamp
from .operation import Op, pair


@dataclass(frozen=True, slots=True)
class Window:
    path: str
    session: str
    agent: str
    mode: str
    token: int | None
    start: float  # the claim's answer (or the renewal's, for a window a renewal opened)
    end: float
    why: str  # what ended it: release sent, expiry, leave sent, retired, mode change


@dataclass(frozen=True)
class BlackBox:
    windows: int
    exclusive_windows: int
    overlaps: tuple[Problem, ...]


@dataclass
class _Open:
    mode: str
    token: int | None
    start: float
    expires_at: float
    agent: str


def windows(ops: list[Op]) -> list[Window]:
    """Every holding window the history proves, per session and path."""
    held: dict[str, dict[str, _Open]] = defaultdict(dict)  # session -> path -> open window
    out: list[Window] = []

    def close(session: str, path: str, at: float, why: str) -> None:
        w = held[session].pop(path)
        end, why = (w.expires_at, "expiry") if w.expires_at < at else (at, why)
        if end > w.start:
            out.append(Window(path, session, w.agent, w.mode, w.token, w.start, end, why))

    for op in sorted(ops, key=lambda o: o.start):
        s, path, r = op.session, op.path, op.result or {}
        if s is None:
            continue
        mine = held[s]
        if op.outcome == "info":  # the process retires: stop trusting what it held
            for p in list(mine):
                close(s, p, op.start, "retired")
            continue
        if op.f == "room_leave":
            for p in list(mine):
                close(s, p, op.start, "leave sent")
        elif op.f == "lease_release" and path in mine:
            close(s, path, op.start, "release sent")
        elif not isinstance(r.get("expires_at"), int | float):
            continue  # a window needs the expiry the store announced
        elif op.f == "lease_claim" and op.outcome == "ok" and r.get("ok") and path is not None:
            mode = r.get("mode") or op.args.get("mode") or "exclusive"
            cur = mine.get(path)
            # The holder's own re-claim extends its window only if the old lease outlived the
            # answer: one that ran out meanwhile was granted anew, maybe after someone else's.
            if cur is not None and cur.mode == mode and cur.expires_at > (op.end or op.start):
                cur.expires_at, cur.token = float(r["expires_at"]), r.get("token")
                continue
            if cur is not None:
                close(s, path, op.start, "mode change" if cur.mode != mode else "re-claim")
            mine[path] = _Open(mode, r.get("token"), op.end or op.start, float(r["expires_at"]), op.agent)
        elif op.f == "lease_renew" and op.outcome == "ok" and path is not None:
            cur = mine.get(path)
            if cur is not None and cur.expires_at > op.start:  # a renewal never revives an expired lease
                cur.expires_at, cur.token = float(r["expires_at"]), r.get("token")
            elif cur is not None:  # renewed after the expiry it knew: held again from the answer
                close(s, path, op.start, "expiry")
                mine[path] = _Open(cur.mode, r.get("token"), op.end or op.start, float(r["expires_at"]), op.agent)
    for s, paths in held.items():
        for p in list(paths):
            close(s, p, float("inf"), "expiry")
    return out


def overlaps(found: list[Window]) -> list[Problem]:
    """Pairs of windows of different sessions on one path that overlap, one exclusive."""
    by_path: dict[str, list[Window]] = defaultdict(list)
    for w in found:
        by_path[w.path].append(w)
    problems = []
    for path, ws in by_path.items():
        active: list[Window] = []
        for w in sorted(ws, key=lambda x: x.start):
            active = [a for a in active if a.end > w.start]
            for a in active:
                if a.session != w.session and "exclusive" in (a.mode, w.mode):
                    problems.append(Problem("lease-windows", (
                        f"{path}: session {a.session} ({a.agent}) held it {a.mode} (token {a.token}) from "
                        f"{stamp(a.start)} until {stamp(a.end)} ({a.why}), and session {w.session} ({w.agent}) "
                        f"was answered {w.mode} (token {w.token}) at {stamp(w.start)}"),
                        {"path": path, "sessions": [a.session, w.session], "tokens": [a.token, w.token],
                         "walls": [a.start, a.end, w.start], "modes": [a.mode, w.mode]}))
            active.append(w)
    return problems


def check_ops(ops: list[Op]) -> BlackBox:
    found = windows(ops)
    return BlackBox(len(found), sum(w.mode == "exclusive" for w in found), tuple(overlaps(found)))


def check(history: list[dict[str, Any]], spellings: Mapping[str, str] | None = None) -> BlackBox:
    """The second opinion from raw history records (docs/history.md); ``spellings``: the
    run's spelled folders (``identity``), so that windows are judged per file."""
    return check_ops(pair(Spellings(spellings).records(history))[0])

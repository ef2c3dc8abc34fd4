"""What really happened to the files: drift truth (invariant ``drift-truth``) and stale-holder
writes (reported apart).

The agents' ``edit`` records are the ground truth of who wrote a file and when; the lease
events say who held it. A drift_check's answer is judged against both, with the store's
baseline (the session's latest note_read before the check):

- ``SAFE`` is wrong when an edit surely landed between the baseline's hash and the check;
- ``MINOR`` or ``CRITICAL`` (changed) are wrong when no edit could have landed in between;
- ``CRITICAL`` is wrong when no other session held the path at the read, nor was granted or
  renewed it before the check could have looked (a lease of a directory over the path counts);
- ``MINOR`` is wrong when another session held it at the read, or surely got a grant or
  renewal between the read and the check.

"Surely" and "could have" come from the wall windows: an op happened somewhere inside its
[invoke, completion]; only a window wholly inside the interval is sure.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from .cover import above
from .model import Problem, stamp
from .operation import Op, normal_path
from .replay import Replay


@dataclass(frozen=True)
class StaleWrite:
    path: str
    session: str
    token: int
    wall: float  # when the write was invoked
    newer_token: int
    newer_session: str
    newer_seq: int

    def describe(self) -> str:
        return (f"{self.path}: session {self.session} wrote with token {self.token} at {stamp(self.wall)}, after "
                f"session {self.newer_session} was granted token {self.newer_token} (seq {self.newer_seq})")


def _edit_path(op: Op) -> str | None:
    return normal_path(op.result) or op.path


def check_drift(rep: Replay, ops: list[Op], owner: dict[int, Op], slack: float) -> tuple[int, list[Problem]]:
    edits: dict[str, list[Op]] = defaultdict(list)  # completed writes
    unsure: dict[str, list[Op]] = defaultdict(list)  # writes whose outcome is unknown (info)
    for op in ops:
        path = _edit_path(op) if op.f == "edit" else None
        if path is not None and op.outcome in ("ok", "info"):
            (edits if op.outcome == "ok" and op.end is not None else unsure)[path].append(op)
    longest = {p: max(o.end - o.start for o in es) for p, es in edits.items()}  # type: ignore[operator]
    starts = {p: [o.start for o in es] for p, es in edits.items()}
    covering: dict[str, list] = {}  # a file's grants and those of every directory over it, by seq
    problems: list[Problem] = []
    checked = 0
    for op in ops:
        if op.f != "drift_check" or op.outcome != "ok" or op.session is None or op.path is None:
            continue
        checked += 1
        severity = (op.result or {}).get("severity")
        path, session, start, end = op.path, op.session, op.start, op.end or op.start
        reads = rep.reads.get((session, path), [])
        i = bisect.bisect_right(reads, (end, float("inf"))) - 1
        if i < 0:
            if severity != "SAFE":
                problems.append(_problem(op, severity, "there was no note_read before it (no baseline)", None))
            continue
        read_at, read_seq = reads[i]
        read_op = owner.get(read_seq)
        hashed_from = read_op.start if read_op is not None else read_at
        held_then = rep.held_at_read.get(read_seq)

        may_other = must_other = None
        if path not in covering:
            found = sorted((g for p in (path, *above(path)) for g in rep.grants.get(p, ())), key=lambda g: g.seq)
            covering[path] = [found, [g.seq for g in found]]
        grants, seqs = covering[path]
        for k in range(bisect.bisect_right(seqs, read_seq), len(grants)):
            g = grants[k]
            if g.at > end + slack:
                break
            if g.session != session:
                may_other = may_other or g
                if g.at < start - slack:
                    must_other = g
                    break

        must_change = may_change = None
        lo = bisect.bisect_left(starts.get(path, []), hashed_from - slack - longest.get(path, 0.0))
        path_edits = edits.get(path, [])
        for k in range(lo, len(path_edits)):
            e = path_edits[k]
            if e.start > end + slack:
                break
            if e.end >= hashed_from - slack:  # type: ignore[operator]
                may_change = may_change or e
            if e.start > read_at + slack and e.end < start - slack:  # type: ignore[operator]
                must_change = e
                break
        may_change = may_change or next((e for e in unsure.get(path, []) if e.start <= end + slack), None)

        base = f"baseline note_read seq {read_seq} at {stamp(read_at)}"
        if severity == "SAFE" and must_change:
            problems.append(_problem(op, severity, f"{must_change.describe()} wrote the file after the {base}", read_seq))
        if severity in ("MINOR", "CRITICAL") and not may_change:
            problems.append(_problem(op, severity, f"no edit of the file could have landed since the {base}", read_seq))
        if severity == "CRITICAL" and not (held_then or may_other):
            problems.append(_problem(op, severity, f"no other session held it at the {base} nor got a grant "
                                                   "or renewal of it since", read_seq))
        if severity == "MINOR" and (held_then or must_other):
            who = (f"session {held_then} held it at the read" if held_then else
                   f"session {must_other.session} got {must_other.kind} token {must_other.token} "  # type: ignore[union-attr]
                   f"(seq {must_other.seq}) since")  # type: ignore[union-attr]
            problems.append(_problem(op, severity, f"{who} ({base})", read_seq))
    return checked, problems


def _problem(op: Op, severity: object, why: str, read_seq: int | None) -> Problem:
    return Problem("drift-truth", f"{op.path}: {op.describe()} said {severity}, but {why}",
                   {"seq": read_seq, "path": op.path, "session": op.session, "severity": severity, "wall": op.end})


def stale_writes(rep: Replay, ops: list[Op]) -> list[StaleWrite]:
    """Edits carrying a token below the latest grant or renewal made to another session
    before the write began: a holder paused past its lease kept writing."""
    ats = {p: [g.at for g in gs] for p, gs in rep.grants.items()}
    found = []
    for op in ops:
        token = (op.result or {}).get("token")
        path = _edit_path(op) if op.f == "edit" and op.outcome == "ok" else None
        if path is None or not isinstance(token, int) or op.session is None:
            continue
        i = bisect.bisect_left(ats.get(path, []), op.start) - 1
        if i < 0:
            continue
        latest = rep.grants[path][i]
        if latest.token > token and latest.session != op.session:
            found.append(StaleWrite(path, op.session, token, op.start, latest.token, latest.session, latest.seq))
    return found

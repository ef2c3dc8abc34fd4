"""Guarded edits (invariant ``edit-guard``): agents that never claim edit through their
harness's edit guard (``guarded_edit``, sim/run/editguard.py), and the guard must keep two of
them off one file. Judged after the oracle's replay, from its lease timelines, the events and
the history:

- EG1: an edit the guard allowed was made while its session held an exclusive lease of the
  file granted at an edit (its grant event says ``at_edit``), at some moment of its window;
  and a grant an allowed edit caused is exclusive, ``at_edit``, for the guard's TTL.
- EG2: a denied edit names a holder whose live lease (any mode: an edit needs the file to
  itself; or a directory's over it) was in its way at some moment of its window.
- EG3: no two sessions' writes of one file overlap. An allowed edit holds the file from its
  invoke for the least its lease lives (the guard's TTL less the span within which it skips a
  renewal, store/editclaim.py and harnesses/editguard.py), or until its session leaves;
  another session's allowed edit of the file begun inside that span is an **overlapping
  write**: two sessions writing one file while both believed they could. From the history and
  the leave events alone, so an edit made with no guard at all (``[workload] edits = "off"``,
  the control) is judged by the same rule.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agents_room.harnesses.editlook import RENEWED_WITHIN_S
from agents_room.store.editclaim import EDIT_TTL_S

from .model import Problem, stamp
from .operation import Op
from .oracle_leases import store_span
from .oracle_reads import _contending_states, _lease_states
from .oracle_state import Oracle
from .rules import problem

# The least an allowed edit's lease lives from the edit: a renewal skipped within
# RENEWED_WITHIN_S of the last one, which was for EDIT_TTL_S.
HOLDS_S = EDIT_TTL_S - RENEWED_WITHIN_S
TTL_SLACK_S = 1e-3


def edits(ops: list[Op]) -> list[Op]:
    """The guarded edits that were answered (allowed or denied), with a path."""
    return [op for op in ops if op.f == "guarded_edit" and op.outcome == "ok" and op.end is not None and op.path]


def check(o: Oracle, ops: list[Op], events: list[Any], owner: dict[int, Op], slack: float) -> tuple[list[Problem], dict[str, int]]:
    """Every guarded edit judged (EG1, EG2) and the overlapping writes (EG3); the counts for the
    report: guarded edits, allowed, denied, allowed by a guard that said it is not working
    (it fails open: ``guarded_unguarded``), overlapping writes."""
    mine = edits(ops)
    at_edit = {(e.session_id, e.payload.get("token")) for e in events
               if e.kind == "lease_grant" and e.payload.get("at_edit")}
    out: list[Problem] = []
    for ev in events:
        op = owner.get(ev.seq)
        if op is not None and op.f == "guarded_edit" and ev.kind == "lease_grant":
            o.checked["edit-guard"] += 1
            span = store_span(ev.payload, ev.at, float(ev.payload.get("expires_at", ev.at)))
            if ev.payload.get("mode") != "exclusive" or not ev.payload.get("at_edit") or \
                    abs(span - EDIT_TTL_S) > TTL_SLACK_S:
                out.append(problem("EG1", f"{op.describe()}: its grant (seq {ev.seq}) of {ev.path} is "
                                   f"{ev.payload.get('mode')}, at_edit {ev.payload.get('at_edit')!r}, for {span:g} s; "
                                   f"an edit takes an exclusive lease at_edit for {EDIT_TTL_S:g} s",
                                   seq=ev.seq, path=ev.path, session=ev.session_id))
    for op in mine:
        o.checked["edit-guard"] += 1
        lo, hi = op.start - slack, op.end + slack  # type: ignore[operator]
        result = op.result or {}
        if result.get("ok"):
            if not any(h.session == op.session and h.mode == "exclusive" and (h.session, h.token) in at_edit
                       for holds in _lease_states(o, op.path, lo, hi) for h in holds):  # type: ignore[arg-type]
                why = f" (the guard said it is not working: {result['broken']})" if result.get("broken") else ""
                out.append(problem("EG1", f"{op.describe()}: wrote {op.path} without holding an exclusive lease of "
                                   f"it taken at an edit at any moment of its window{why}", op=op.describe(),
                                   process=op.process, index=op.index, wall=op.end, path=op.path))
            continue
        named = result.get("holder")
        in_the_way = [{h.session for h in holds if h.session != op.session}
                      for holds in _contending_states(o, op.path, lo, hi)]  # type: ignore[arg-type]
        if named is None or not any(named in sessions for sessions in in_the_way):
            out.append(problem("EG2", f"{op.describe()}: was denied {op.path} naming holder {named}, who held no "
                               f"live lease in its way at any moment of its window (holders then: "
                               f"{[sorted(s) for s in in_the_way[:4]]})", op=op.describe(), process=op.process,
                               index=op.index, wall=op.end, path=op.path, answered=named))
    overlaps = overlapping(mine, events)
    o.checked["edit-guard"] += len([op for op in mine if (op.result or {}).get("ok")])
    out += overlaps
    allowed = sum(1 for op in mine if (op.result or {}).get("ok"))
    broken = sum(1 for op in mine if (op.result or {}).get("broken"))
    return out, {"guarded_edits": len(mine), "guarded_allowed": allowed, "guarded_denied": len(mine) - allowed,
                 "guarded_unguarded": broken, "overlapping_writes": len(overlaps)}


def overlapping(mine: list[Op], events: list[Any]) -> list[Problem]:
    """EG3: each allowed edit begun while another session's allowed edit of the same file still
    held it (from that edit's invoke, for :data:`HOLDS_S` or until its session left)."""
    leaves: dict[str, list[float]] = defaultdict(list)
    for ev in events:
        if ev.kind == "leave" and ev.session_id:
            leaves[ev.session_id].append(ev.at)
    by_file: dict[str, list[Op]] = defaultdict(list)
    for op in mine:
        if (op.result or {}).get("ok"):
            by_file[op.path].append(op)  # type: ignore[index]
    out = []
    for path, writes in sorted(by_file.items()):
        holding: dict[str, tuple[float, Op]] = {}  # session -> (until, the edit that holds it longest)
        for w in sorted(writes, key=lambda o: (o.start, o.process)):
            other = [(until, h) for s, (until, h) in holding.items() if s != w.session and until > w.start]
            if other:
                until, h = min(other, key=lambda x: x[1].start)
                out.append(problem("EG3", (
                    f"{w.describe()} wrote {path} while {h.describe()} held it (allowed from {stamp(h.start)} until "
                    f"{stamp(until)}): two sessions writing one file, both believing they could"),
                    op=w.describe(), process=w.process, index=w.index, wall=w.end, path=path,
                    other=h.session, session=w.session))
            until = w.start + HOLDS_S
            for at in leaves.get(w.session or "", ()):
                if at >= w.start:
                    until = min(until, at)
            if w.session is not None and until > holding.get(w.session, (0.0, w))[0]:
                holding[w.session] = (until, w)
    return out

"""What each injected fault did, from the nemesis's log, the history and the checker's result:
the report's fault section, and the problems that make a fault run invalid on their own.

Per kind: how many were injected (and which planned ones never happened, and why), and the
effect the fault exists to show:

- ``kill``, ``kill_in_write``: the operation each victim died in (an ``info`` the checker
  settles from the events);
- ``pause_holder``: the paused holder's edit after waking, reported as a stale-holder write;
- ``pause_write``: ``store_busy`` answers to the others while the writer was stopped, and the
  longest any of them waited (a problem past the bounded wait plus :data:`WAIT_SLACK_S`);
- ``disk_full``: ``store_error`` answers to the victim (a problem if anyone else got one);
- ``clock_jump``: the shifts and where they fall in commit order;
- ``garbage_store``: each command's refusal of each damaged copy (a problem if one accepted
  it, did not name it, or changed it).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..check.operation import Op, pair
from . import refusal

# Past the bounded wait, how much later an answer may come on a loaded machine before a
# waiter is taken to have hung on the stopped writer.
WAIT_SLACK_S = 1.5
WRITES = frozenset({"room_join", "room_leave", "room_leave_room", "msg_send", "msg_recv", "msg_ack", "lease_claim",
                    "lease_renew", "lease_release", "note_read"})


def _check_dict(check: Any) -> dict[str, Any]:
    return check if isinstance(check, dict) else check.to_dict() if hasattr(check, "to_dict") else {}


def _dangling(ops: list[Op], agent: str, wall: float) -> Op | None:
    """The operation ``agent``'s process was in when it was killed at ``wall``."""
    found = [o for o in ops if o.agent == agent and o.error == "killed" and o.start <= wall + 0.05]
    return max(found, key=lambda o: o.start, default=None)


def _kills(ops: list[Op], done: list[dict[str, Any]]) -> dict[str, Any]:
    names = sorted(o.f for f in done if (o := _dangling(ops, f["agent"], f["wall"])) is not None)
    which = ", ".join(sorted(set(names))) or "-"
    return {"died_mid_operation": len(names), "operations": names,
            "observed": f"{len(names)} of {len(done)} died inside an operation ({which})"}


def _pause_holder(ops: list[Op], done: list[dict[str, Any]], stale: list[dict[str, Any]]) -> dict[str, Any]:
    seen = 0
    for f in done:
        edit = min((o for o in ops if o.agent == f["agent"] and o.f == "edit" and o.start >= f["wall_end"] - 0.05),
                   key=lambda o: o.start, default=None)
        if edit is not None and edit.outcome == "ok" and any(
                w["session"] == edit.session and w["token"] == (edit.result or {}).get("token") for w in stale):
            seen += 1
    return {"stale_writes": seen, "exercised": seen > 0,
            "observed": f"{seen} of {len(done)} woke up and wrote with a superseded token (stale-holder writes)"}


def _pause_write(ops: list[Op], done: list[dict[str, Any]], busy_timeout_s: float) -> tuple[dict[str, Any], list[str]]:
    busy, longest, problems = 0, 0.0, []
    for f in done:
        lo, hi = f["wall"], f["wall_end"]
        others = [o for o in ops if o.agent != f["agent"] and o.f in WRITES and lo <= o.start <= hi and o.end]
        busy += sum(o.error == "store_busy" for o in others)
        waits = [o.end - o.start for o in others if o.end]  # type: ignore[operator]
        worst = max(waits, default=0.0)
        longest = max(longest, worst)
        if worst > busy_timeout_s + WAIT_SLACK_S:
            problems.append(f"pause_write of {f['agent']}: another agent's write waited {worst:.2f} s for the stopped "
                            f"writer, past the bounded wait of {busy_timeout_s:g} s")
    return {"store_busy": busy, "longest_wait_s": round(longest, 3), "exercised": busy > 0,
            "observed": f"{busy} store_busy answers to the others; the longest wait {longest:.2f} s "
                        f"(bounded wait {busy_timeout_s:g} s)"}, problems


def _disk_full(ops: list[Op], done: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    mine = others = 0
    problems = []
    for f in done:
        lo, hi = f["wall"], f["wall_end"] + 0.5
        errors = [o for o in ops if o.error == "store_error" and lo <= o.start <= hi]
        mine += sum(o.agent == f["agent"] for o in errors)
        theirs = [o for o in errors if o.agent != f["agent"]]
        others += len(theirs)
        if theirs:
            problems.append(f"disk_full of {f['agent']}: {theirs[0].describe()} got store_error too")
    return {"store_errors": mine, "store_errors_others": others, "exercised": mine > 0,
            "observed": f"{mine} store_error answers to the agent over its limit, {others} to the others"}, problems


def _garbage(nemesis: Any, layout: Any, agents_room: Callable[[], str]) -> tuple[dict[str, Any], list[str]]:
    kinds = nemesis.plan.garbage_store
    copies = refusal.damage(Path(layout.db), layout.out / "damaged", kinds, random.Random(nemesis.runner.scn.run.seed))
    results = refusal.try_all(copies, layout.out / "scenario.toml", agents_room())
    problems = [f"garbage_store: `{r.command}` on the {r.damage}d store exited {r.exit_code}"
                f"{'' if r.names_file else ', not naming the file'}{'' if r.unchanged else ', and changed it'}: "
                f"{r.message}" for r in results if not r.ok]
    refused = sum(r.ok for r in results)
    return {"injected": len(copies), "refusals": [r.to_dict() for r in results], "exercised": refused == len(results),
            "observed": f"{refused} of {len(results)} commands refused a damaged store, naming it, "
                        "leaving it as it was"}, problems


def info_settled(ops: list[Op], info: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The checker's settling of ``info`` ops (``info``: per tool, found / not_found /
    unsettled), summed, with ``total`` (every info op) and ``reads``: the info ops of kinds the
    checker does not match to events (reads, file edits, room changes), per tool, so that the
    report's sentence adds up to every info op."""
    settled: dict[str, Any] = {k: sum(c.get(k, 0) for c in info.values()) for k in ("found", "not_found", "unsettled")}
    every = [op for op in ops if op.outcome == "info"]
    settled["total"] = len(every)
    settled["reads"] = dict(Counter(op.f for op in every if op.f not in info))
    return settled


def summarize(nemesis: Any, records: list[dict[str, Any]], check: Any, layout: Any,
              agents_room: Callable[[], str]) -> dict[str, Any]:
    """The fault section. ``agents_room`` finds the ``agents-room`` command, called only when
    a ``garbage_store`` fault has damaged copies to try it on."""
    scn = nemesis.runner.scn
    ops = pair(records)[0]
    stale = _check_dict(check).get("stale_writes") or []
    kinds: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for kind in scn.faults.kinds():
        done = [f for f in nemesis.log if f["fault"] == kind and "missed" not in f]
        row: dict[str, Any] = {"injected": len(done), "exercised": bool(done),
                               "missed": [f["missed"] for f in nemesis.log if f["fault"] == kind and "missed" in f]}
        if kind in ("kill", "kill_in_write"):
            row.update(_kills(ops, done))
        elif kind == "pause_holder":
            row.update(_pause_holder(ops, done, stale))
        elif kind == "pause_write":
            found, more = _pause_write(ops, done, scn.run.busy_timeout_s)
            row.update(found)
            problems += more
        elif kind == "disk_full":
            found, more = _disk_full(ops, done)
            row.update(found)
            problems += more
        elif kind == "clock_jump":
            row["observed"] = "; ".join(f"{f['shift_s']:+g} s before seq {f['boundary_seq']}" for f in done) or "-"
        elif kind == "garbage_store":
            found, more = _garbage(nemesis, layout, agents_room)
            row.update(found)
            problems += more
        row["exercised"] = bool(row["injected"]) and row["exercised"]
        kinds[kind] = row
    settled = info_settled(ops, _check_dict(check).get("info") or {})
    return {"kinds": kinds, "problems": problems, "info_settled": settled,
            "retimed": bool(scn.faults.clock_jumps_s)}

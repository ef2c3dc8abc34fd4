"""The checker's results in report.md's words: each invariant (one checked 0 times reads `not
exercised`, naming the scenario that exercises it), the delivery arithmetic, the `info`
operations, the guarded edits and their overlapping writes, the stale-holder writes; and the faults injected, per kind, with what each showed."""

from __future__ import annotations

from typing import Any

# The scenario that exercises an invariant a run checked 0 times: the wake rules need agents
# that are their own wake levers (the wake mutants are caught on wake.toml: tests/mutants),
# the edit guard's, agents that edit through it (forgetful.toml); a smoke run checks every other
# one (seen in its report; its wake row is tested to read so).
EXERCISED_BY = {"wake": "scenarios/wake.toml", "edit-guard": "scenarios/forgetful.toml"}
EXERCISED_BY_DEFAULT = "scenarios/smoke.toml"


def invariant_lines(inv: dict[str, Any]) -> list[str]:
    """The checker's results: each invariant, the delivery arithmetic, the info ops, the
    stale-holder writes."""
    if not isinstance(inv.get("invariants"), dict):
        return []
    lines = ["## Invariants", "", "| invariant | result | checked | violations |", "|---|---|--:|--:|"]
    for name, r in inv["invariants"].items():
        status = r.get("status", "?")
        shown = "ok" if status == "ok" else f"**{status}**"
        if status == "ok" and not r.get("checked"):  # nothing to hold against: not a pass
            shown = f"not exercised (`{EXERCISED_BY.get(name, EXERCISED_BY_DEFAULT)}` exercises it)"
        lines.append(f"| {name} | {shown} | {r.get('checked', 0):,} | {r.get('violations', 0):,} |")
    lines.append("")
    for why in inv.get("unknown_because") or []:
        lines.append(f"- unknown: {why}")
    dl = inv.get("deliveries") or {}
    if dl:
        lines.append(f"Deliveries: {dl.get('messages', 0):,} messages to {dl.get('sent', 0):,} recipients; "
                     f"{dl.get('delivered_once', 0):,} received exactly once, {dl.get('lost', 0)} lost, "
                     f"{dl.get('duplicated', 0)} duplicated, {dl.get('unexpected', 0)} unexpected; "
                     f"{dl.get('unread_recipient_gone', 0):,} unread because the recipient left, "
                     f"{dl.get('expired', 0):,} expired, {dl.get('read_by_info_recv', 0):,} read by a recv whose "
                     f"answer was lost, {dl.get('undrained', 0):,} undecided.")
    info = inv.get("info") or {}
    if info:
        lines.append("Operations that ended `info`, settled from the events: " + "; ".join(
            f"{f} " + ", ".join(f"{k} {v}" for k, v in c.items()) for f, c in sorted(info.items())) + ".")
    counts = inv.get("counts") or {}
    if counts.get("guarded_edits"):
        lines.append(f"Guarded edits (through the edit guard, by agents that never claim): {counts['guarded_edits']:,}; "
                     f"{counts['guarded_allowed']:,} allowed, {counts['guarded_denied']:,} denied, "
                     f"{counts.get('guarded_unguarded', 0):,} let through by a guard that said it was not working; "
                     f"**{counts['overlapping_writes']:,} overlapping writes** (two sessions writing one file while "
                     "both believed they could).")
    stale = inv.get("stale_writes") or []
    lines.append(f"Stale-holder writes (an edit carrying a token older than the latest grant; what fencing tokens are "
                 f"for, not a violation): {len(stale)}.")
    for w in stale[:5]:
        lines.append(f"- {w['path']}: session {w['session']} wrote with token {w['token']} after session "
                     f"{w['newer_session']} was granted token {w['newer_token']}")
    lines.append("")
    return lines


def fault_lines(summary: dict[str, Any] | None) -> list[str]:
    """Faults injected per kind and what each showed (sim/faults/report.py)."""
    if not summary:
        return []
    lines = ["## Faults", "", "| fault | injected | observed | missed |", "|---|--:|---|---|"]
    for kind, row in summary["kinds"].items():
        missed = "; ".join(sorted(set(row["missed"]))) if row["missed"] else ""
        observed = row.get("observed") or ("-" if not row["injected"] else "")
        shown = observed if row["exercised"] else f"**not exercised** {observed}".strip()
        lines.append(f"| {kind} | {row['injected']} | {shown} | {missed} |")
    lines.append("")
    s = summary["info_settled"]
    settled = s["found"] + s["not_found"] + s["unsettled"]
    reads = s.get("reads") or {}
    total = s.get("total", settled)
    words = (f"{total} operations ended `info` (kills, store errors)" + (
        f"; {settled} of them change the store and were settled from the events" if reads else
        ", settled from the events") + f": {s['found']} took effect, {s['not_found']} did not, {s['unsettled']} unsettled")
    if reads:
        words += (f"; the other {total - settled} are of kinds no event settles (" +
                  ", ".join(f"{f} {n}" for f, n in sorted(reads.items())) + "): reads, file edits, room changes")
    lines.append(words + ".")
    if summary.get("retimed"):
        lines.append("The store's clock was jumped: every event time and lease expiry was put back on the host "
                     "clock (from each jump's place in commit order) before checking.")
    for p in summary["problems"]:
        lines.append(f"- **fault handling failed**: {p}")
    lines.append("")
    return lines

"""The checker: what the store's events and the clients' history prove about a run.

load -> every path in its real spelling (``identity``) -> replay the events through the model
(``replay``) -> cross-check history and events (``crosscheck``) -> delivery arithmetic
(``delivery``) -> drift truth and stale-holder writes (``drift``) -> the black-box lease windows
(``blackbox``) -> the oracle (``oracle``, ``oracle_reads``) -> guarded edits (``guarded``) ->
integrity -> verdict.

The verdict is ``invalid`` as soon as one violation exists, ``unknown`` when something needed
to decide is missing (a recipient never drained, an ``info`` op that cannot be settled, no
integrity answer), else ``valid``. See docs/history.md for the invariants.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agents_room.store import Event

from . import blackbox, guarded, oracle, oracle_reads, window
from .crosscheck import crosscheck
from .delivery import Arithmetic, tally
from .identity import Spellings
from .drift import StaleWrite, check_drift, stale_writes
from .model import Problem
from .operation import pair
from .replay import replay

INVARIANTS = (
    "lease-exclusive", "lease-token-monotonic", "lease-release-held", "delivery-forward",
    "delivery-exactly-once", "history-events", "drift-truth", "integrity", "lease-windows",
    *oracle.GROUPS,
)
Status = Literal["ok", "violated", "unknown"]


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str  # the counterexample in words: path or message, sessions, seqs, wall times
    seq: int | None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InvariantResult:
    status: Status
    checked: int
    violations: int


@dataclass(frozen=True)
class Verdict:
    verdict: Literal["valid", "invalid", "unknown"]
    counterexample: str | None
    violations: tuple[Violation, ...]  # at most ``max_listed`` per invariant, earliest first
    invariants: dict[str, InvariantResult]
    stale_writes: tuple[StaleWrite, ...]  # not violations: what fencing tokens are for
    info: dict[str, dict[str, int]]  # f -> found / not_found / unsettled
    deliveries: Arithmetic
    integrity: str | None
    unknown_because: tuple[str, ...]
    counts: dict[str, int]  # events, ops, windows, ...
    # the oracle's rules broken: rule id -> invariant, violations, the first counterexample
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"valid": 0, "invalid": 1, "unknown": 2}[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for report.json."""
        return {
            "verdict": self.verdict,
            "counterexample": self.counterexample,
            "violations": [asdict(v) for v in self.violations],
            "invariants": {name: asdict(r) for name, r in self.invariants.items()},
            "stale_writes": [asdict(w) for w in self.stale_writes],
            "info": self.info,
            "deliveries": asdict(self.deliveries),
            "integrity": self.integrity,
            "unknown_because": list(self.unknown_because),
            "counts": self.counts,
            "rules": self.rules,
        }


def load_events(items: list[Any]) -> list[Event]:
    """Events as ``Store.events()`` gives them; plain dicts (a JSON file) are accepted too."""
    out = []
    for position, e in enumerate(items):
        if isinstance(e, Event):
            out.append(e)
            continue
        if not isinstance(e, dict):
            raise ValueError(f"event {position}: must be an Event or an object, got {type(e).__name__}")
        for name in ("seq", "at", "kind"):
            if name not in e:
                raise ValueError(f"event {position}: missing field {name!r}")
        out.append(Event(int(e["seq"]), float(e["at"]), e.get("session_id"), e["kind"], e.get("path"),
                         dict(e.get("payload") or {})))
    return out


def check(events: list[Any], history: list[dict[str, Any]], integrity: str | None, *,
          clock_slack_s: float = 0.01, max_listed: int = 100,
          spellings: Mapping[str, str] | None = None) -> Verdict:
    """Decide a run from the store's events (``seq`` order), the merged history records and
    the answer of ``PRAGMA integrity_check``. ``clock_slack_s`` is how far an event's ``at``
    may lie outside its op's wall window (two clocks read on one host). ``spellings``: the
    run's spelled folders, each with the real folder it names (``spellings.json``): every
    path is judged as the file it names (``identity``)."""
    names = Spellings(spellings)
    events = names.events(load_events(events))
    history = names.records(history)
    ops, history_problems = pair(history)
    rep = replay(events)
    cross = crosscheck(ops, events, clock_slack_s)
    arithmetic, delivery_problems = tally(rep, ops, cross.owner, clock_slack_s)
    drift_checked, drift_problems = check_drift(rep, ops, cross.owner, clock_slack_s)
    stale = stale_writes(rep, ops)
    box = blackbox.check_ops(ops)
    orc = oracle.check_events(events, cross.owner, ops, clock_slack_s)
    read_problems = oracle_reads.check_ops(orc, ops, clock_slack_s, window.Commits.of(events, cross.owner, clock_slack_s))
    edit_problems, edit_counts = guarded.check(orc, ops, events, cross.owner, clock_slack_s)
    problems = [*rep.problems, *history_problems, *cross.problems, *delivery_problems, *drift_problems,
                *box.overlaps, *orc.problems, *read_problems, *edit_problems]
    if integrity is not None and integrity != "ok":
        problems.append(Problem("integrity", f"PRAGMA integrity_check answered {integrity!r}, not 'ok'",
                                {"answer": integrity}))

    unsettled = sum(c["unsettled"] for c in cross.settled.values())
    unknown: dict[str, str] = {}
    if arithmetic.undrained:
        unknown["delivery-exactly-once"] = (f"{arithmetic.undrained} deliveries are unread and their recipients "
                                            "never drained after the send: loss cannot be decided")
    if unsettled:
        unknown["history-events"] = f"{unsettled} info ops cannot be settled from the events"
    if integrity is None:
        unknown["integrity"] = "no integrity_check answer"
    if not ops and not events:
        unknown["history-events"] = "the history and the events are both empty: nothing was checked"

    checked = {
        **rep.checked, "delivery-exactly-once": arithmetic.sent + arithmetic.unexpected,
        "history-events": cross.checked, "drift-truth": drift_checked, "integrity": 1,
        "lease-windows": box.windows, **orc.checked,
    }
    tally_by = Counter(p.invariant for p in problems)
    results = {
        name: InvariantResult("violated" if tally_by[name] else "unknown" if name in unknown else "ok",
                              checked.get(name, 0), tally_by[name])
        for name in INVARIANTS
    }
    violations = _listed(problems, max_listed)
    first = min(violations, key=lambda v: (v.seq is None, v.seq or 0), default=None)
    verdict = "invalid" if problems else "unknown" if unknown else "valid"
    return Verdict(
        verdict=verdict,
        counterexample=f"{first.invariant}: {first.message}" if first else None,
        violations=violations,
        invariants=results,
        stale_writes=tuple(stale),
        info=cross.settled,
        deliveries=arithmetic,
        integrity=integrity,
        unknown_because=tuple(unknown.values()),
        counts={"events": rep.events, "ops": len(ops), "history_records": len(history),
                "lease_windows": box.windows, "exclusive_windows": box.exclusive_windows,
                "stale_writes": len(stale), **edit_counts},
        rules=_rules(problems),
    )


def _rules(problems: list[Problem]) -> dict[str, dict[str, Any]]:
    """Each broken rule of the oracle with its count and its first counterexample (by commit
    order, else by the op's completion)."""
    out: dict[str, dict[str, Any]] = {}
    for p in sorted((p for p in problems if p.details.get("rule")),
                    key=lambda p: (p.details.get("seq") is None, p.details.get("seq") or p.details.get("wall") or 0)):
        rule = p.details["rule"]
        if rule not in out:
            out[rule] = {"invariant": p.invariant, "violations": 0, "first": p.message}
        out[rule]["violations"] += 1
    return dict(sorted(out.items()))


def _listed(problems: list[Problem], max_listed: int) -> tuple[Violation, ...]:
    """The earliest ``max_listed`` violations of each invariant (by seq when they have one)."""
    out: list[Violation] = []
    for name in INVARIANTS:
        mine = [p for p in problems if p.invariant == name]
        mine.sort(key=lambda p: (p.details.get("seq") is None, p.details.get("seq") or 0))
        out.extend(Violation(p.invariant, p.message, p.details.get("seq"), dict(p.details)) for p in mine[:max_listed])
    return tuple(out)

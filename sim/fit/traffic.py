"""What a store says of its traffic over a stretch of time: from its events (every write, with
its time and session) and its call counts (every call a server counted, reads included;
store/callcounts.py). Numbers only: rooms, repositories and tags become counts and ranks,
paths become counts per repository; no name, path, label, subject or body leaves this module.

``measure`` is one read transaction; it raises ``agents_room.store.StoreError`` for a store
that is not there or not a store.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from agents_room.store import Store
from agents_room.store.callcounts import WINDOW_S, bucket

from .distribution import histogram_moments, histogram_quantiles, evenly, lognormal, quantile


@dataclass(frozen=True)
class Group:
    """The sessions of one repository room, by rank (the busiest first)."""

    agents: float  # live at once, on average over the window
    sessions: int
    files: int  # distinct paths its sessions leased or read
    rooms: tuple[int, ...]  # shared rooms (ranks) most of its sessions joined
    tags: tuple[int, ...]  # tags (ranks) most of its sessions carried
    autonomy: str | None  # the level most of its sessions had
    hot_share: tuple[int, float] = (0, 0.0)  # paths claimed twice the average or more, and their share of claims


@dataclass(frozen=True)
class Traffic:
    since: float
    until: float
    groups: tuple[Group, ...]
    sessions: int
    created: int  # sessions created inside the window
    agent_s: float  # session-seconds inside the window (the agents' time, summed)
    tools: dict[str, int]  # calls per tool, all outcomes (from the counts; else writes from events)
    outcomes: dict[str, int]  # calls per outcome: ok, denied, error codes
    counted: bool  # call counts cover the window
    minutes_without_counts: int  # minutes with events but no call count: reads there were not seen
    no_session_calls: int  # counted calls that named no well-formed session
    gaps: dict[int, int]  # think-time histogram (callcounts buckets)
    gaps_from: str  # "counts" (every call) or "events" (writes only)
    sends: dict[str, int] = field(default_factory=dict)  # sends per selector kind
    fanout: dict[str, float] = field(default_factory=dict)  # mean recipients per selector kind
    lease_ttls: list[float] = field(default_factory=list)
    holds: list[float] = field(default_factory=list)
    shared_grants: float = 0.0  # share of new grants in shared mode
    mode_changes: int = 0
    max_held: int = 1
    message_ttls: list[float] = field(default_factory=list)  # 0: sent without ttl_s
    body_bytes: float = 0.0
    lifetimes: list[float] = field(default_factory=list)
    leaves: int = 0
    levels: dict[str, int] = field(default_factory=dict)
    wake_levers: int = 0

    @property
    def window_s(self) -> float:
        return max(self.until - self.since, 1e-9)

    @property
    def agents(self) -> float:
        return self.agent_s / self.window_s

    @property
    def calls(self) -> int:
        return sum(self.tools.values())

    def think(self) -> tuple[list[float], float, float, tuple[float, float]]:
        """Percentiles (101, ms), mean ms, coefficient of variation, lognormal (mu, sigma)."""
        mean, cv = histogram_moments(self.gaps)
        return histogram_quantiles(self.gaps, evenly(101)), mean, cv, lognormal(self.gaps)


def selector_kind(selector: str) -> str:
    if selector == "*":
        return "broadcast"
    if selector.startswith("file:"):
        return "file"
    if selector.startswith("tag:"):
        return "tag"
    return "session"


def _window(tx: Any, since: float | None, until: float | None) -> tuple[float, float]:
    first, last = tx.one("SELECT min(at), max(at) FROM events") or (None, None)
    seen = tx.scalar("SELECT max(last_seen) FROM sessions")
    lo = since if since is not None else (first if first is not None else 0.0)
    hi = until if until is not None else max(x for x in (last, seen, lo) if x is not None)
    return float(lo), float(hi)


def _ranks(counter: Counter[str]) -> dict[str, int]:
    """Names to ranks, the most frequent first (ties by first seen): only the rank leaves."""
    return {name: i + 1 for i, (name, _) in enumerate(counter.most_common())}


def measure(where: str, since: float | None = None, until: float | None = None) -> Traffic:
    with Store.open(where, create=False) as store, store.db.read() as tx:
        lo, hi = _window(tx, since, until)
        return _measure(tx, lo, hi)


def _measure(tx: Any, lo: float, hi: float) -> Traffic:
    sessions = tx.all("SELECT id, created_at, left_at, last_seen, autonomy, wake_lever FROM sessions "
                      "WHERE created_at <= ? AND COALESCE(left_at, last_seen) >= ?", (hi, lo))
    ids = {s[0] for s in sessions}
    events = [(at, sid, kind, path, json.loads(payload)) for at, sid, kind, path, payload in tx.all(
        "SELECT at, session_id, kind, path, payload FROM events WHERE at >= ? AND at <= ? ORDER BY seq", (lo, hi))]
    joins = {sid: json.loads(p) for sid, p in tx.all(
        "SELECT session_id, payload FROM events WHERE kind = 'join' ORDER BY seq DESC") if sid in ids}  # first join wins
    span = {s[0]: max(0.0, min(hi, s[2] if s[2] is not None else s[3]) - max(lo, s[1])) for s in sessions}
    repo_of = {sid: next((r for r in j.get("rooms", []) if r.startswith("repo:")), "") for sid, j in joins.items()}
    rooms = _ranks(Counter(r for j in joins.values() for r in j.get("rooms", []) if not r.startswith("repo:")))
    tags = _ranks(Counter(t for j in joins.values() for t in j.get("tags") or []))
    groups = _groups(sessions, joins, repo_of, rooms, tags, span, events, hi - lo)
    counts = [(w, sid, tool, outcome, int(n)) for w, sid, tool, outcome, n in tx.all(  # PostgreSQL's sum: numeric
        "SELECT window_start, session_id, tool, outcome, sum(n) FROM call_counts WHERE window_start >= ? "
        "AND window_start <= ? GROUP BY window_start, session_id, tool, outcome", (math.floor(lo / WINDOW_S) * WINDOW_S, hi))]
    tools: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for _, sid, tool, outcome, n in counts:
        tools[tool] += n
        outcomes[outcome] += n
    minutes = {int(at // WINDOW_S) for at, *_ in events} - {int(w // WINDOW_S) for w, *_ in counts}
    gaps: Counter[int] = Counter()
    for b, n in tx.all("SELECT bucket, sum(n) FROM call_gaps WHERE window_start >= ? AND window_start <= ? "
                       "GROUP BY bucket", (math.floor(lo / WINDOW_S) * WINDOW_S, hi)):
        gaps[int(b)] += int(n)
    gaps_from = "counts"
    if not counts:  # no counts: what the events show (writes only)
        tools, outcomes = _writes(events), Counter({"ok": 0})
        gaps_from, gaps = "events", _event_gaps(events)
    sends, fanout, message_ttls = _messages(events)
    leases = _leases(events, hi)
    body = tx.scalar("SELECT avg(length(body)) FROM messages WHERE created_at >= ? AND created_at <= ?", (lo, hi))
    lifetimes = [(s[2] if s[2] is not None else s[3]) - s[1] for s in sessions if lo <= s[1]]
    return Traffic(
        since=lo, until=hi, groups=groups, sessions=len(sessions), created=sum(1 for s in sessions if s[1] >= lo),
        agent_s=sum(span.values()), tools=dict(tools), outcomes=dict(outcomes), counted=bool(counts),
        minutes_without_counts=len(minutes) if counts else 0,
        no_session_calls=sum(n for _, sid, _, _, n in counts if not sid), gaps=dict(gaps), gaps_from=gaps_from,
        sends=sends, fanout=fanout, message_ttls=message_ttls, body_bytes=float(body or 0), lifetimes=lifetimes,
        leaves=sum(1 for e in events if e[2] == "leave"), levels=dict(Counter(s[4] for s in sessions)),
        wake_levers=sum(1 for s in sessions if s[5]), **leases,
    )


def _groups(sessions: list[tuple], joins: dict[str, dict], repo_of: dict[str, str], rooms: dict[str, int],
            tags: dict[str, int], span: dict[str, float], events: list[tuple], window_s: float) -> tuple[Group, ...]:
    members: dict[str, list[tuple]] = defaultdict(list)
    for s in sessions:
        members[repo_of.get(s[0], "")].append(s)
    paths: dict[str, Counter[str]] = defaultdict(Counter)  # repo -> path -> claims
    touched: dict[str, set[str]] = defaultdict(set)
    for _, sid, kind, path, _ in events:
        if path and sid in repo_of:
            touched[repo_of[sid]].add(path)
            if kind == "lease_grant":
                paths[repo_of[sid]][path] += 1
    out = []
    for repo, group in sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        half = len(group) / 2
        joined = Counter(r for s in group for r in joins.get(s[0], {}).get("rooms", []) if r in rooms)
        carried = Counter(t for s in group for t in joins.get(s[0], {}).get("tags") or [])
        levels = Counter(s[4] for s in group)
        claims = paths[repo]
        files = max(1, len(touched[repo]))
        mean = sum(claims.values()) / files
        hot = [n for n in claims.values() if n >= 2 * mean] if claims else []
        out.append(Group(
            agents=sum(span[s[0]] for s in group) / max(window_s, 1e-9), sessions=len(group), files=files,
            rooms=tuple(sorted(rooms[r] for r, n in joined.items() if n >= half)),
            tags=tuple(sorted(tags[t] for t, n in carried.items() if n >= half)),
            autonomy=levels.most_common(1)[0][0] if levels else None,
            hot_share=(len(hot), sum(hot) / max(1, sum(claims.values()))),
        ))
    return tuple(out)


# The writes each event kind stands for, when no call was counted.
_WRITE_OF = {"lease_grant": "lease_claim", "lease_renew": "lease_renew", "note_read": "note_read",
             "send": "msg_send", "leave_room": "room_leave_room", "cap": "room_set_autonomy_cap", "join": "room_join"}


def _writes(events: list[tuple]) -> Counter[str]:
    out: Counter[str] = Counter()
    for _, _, kind, _, payload in events:
        if kind in _WRITE_OF:
            out[_WRITE_OF[kind]] += 1
        elif kind == "lease_release" and payload.get("reason") == "release":
            out["lease_release"] += 1
        elif kind == "leave" and payload.get("reason") == "leave":
            out["room_leave"] += 1
    return out


def _event_gaps(events: list[tuple]) -> Counter[int]:
    last: dict[str, float] = {}
    out: Counter[int] = Counter()
    for at, sid, *_ in events:
        if sid in last:
            out[bucket((at - last[sid]) * 1000)] += 1
        last[sid] = at
    return out


def _messages(events: list[tuple]) -> tuple[dict[str, int], dict[str, float], list[float]]:
    sends: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    ttls = []
    for _, _, kind, _, p in events:
        if kind == "send":
            k = selector_kind(str(p.get("selector", "")))
            sends[k] += 1
            reached[k] += len(p.get("recipients") or {})
            ttls.append(float(p.get("ttl_s") or 0))
    return dict(sends), {k: reached[k] / n for k, n in sends.items()}, ttls


def _leases(events: list[tuple], hi: float) -> dict[str, Any]:
    """TTLs asked, hold times (a new grant to its release or expiry), the shared share of new
    grants, mode changes by the holder, and the most leases one session held at once."""
    ttls, holds, spans = [], [], defaultdict(list)
    start: dict[tuple[str, str], float] = {}
    new = shared = changes = 0
    for at, sid, kind, path, p in events:
        key = (sid, path)
        if kind in ("lease_grant", "lease_renew") and p.get("expires_at") is not None:
            ttls.append(float(p["expires_at"]) - at)
        if kind == "lease_grant":
            if p.get("previous_mode") is None:
                new += 1
                shared += p.get("mode") == "shared"
                start[key] = at
            elif p["previous_mode"] != p.get("mode"):
                changes += 1
        elif kind in ("lease_release", "lease_expire") and key in start:
            began = start.pop(key)
            end = float(p["expires_at"]) if kind == "lease_expire" and p.get("expires_at") else at
            holds.append(max(0.0, end - began))
            spans[sid].append((began, end))
    for (sid, _), began in start.items():  # still held at the window's end
        spans[sid].append((began, hi))
    return {"lease_ttls": ttls, "holds": holds, "shared_grants": shared / new if new else 0.0, "mode_changes": changes,
            "max_held": max((_most_at_once(s) for s in spans.values()), default=1)}


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    held = most = 0
    for _, step in edges:
        held += step
        most = max(most, held)
    return most


__all__ = ["Group", "Traffic", "measure", "quantile", "selector_kind"]

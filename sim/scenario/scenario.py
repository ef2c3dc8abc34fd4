"""Scenarios: a TOML file parsed strictly into frozen dataclasses.

Every key is known, typed and bounded here; an unknown key, a wrong type or a value out of
range is a :class:`ScenarioError` naming the key and its table, so a typo never silently
becomes a default. ``docs/simulator.md`` documents every key.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import faultplan
from .drivers import EDITS, WAKE_KEYS, check_harness, check_wake
from .faultplan import Faults
from .hosts import HOST_KINDS, Hosts, check_hosts, hosts_to_dict, read_hosts
from .fitted import Fitted, read_fitted
from .tables import ScenarioError, Table, choice, integer, number
from .think import Think, read_think
from .totoml import to_toml

__all__ = ["OPERATIONS", "WAKE_KEYS", "Scenario", "ScenarioError", "Think", "load", "parse", "to_toml"]

Driver = Literal["direct", "mcp", "harness"]
DRIVERS = ("direct", "mcp", "harness")
# The CLIs the harness driver runs (sim/harness/clis.py), each an agent's harness.
HARNESSES = ("claude-code", "codex", "gemini")
Mode = Literal["closed", "open"]

# The operation mix: the weight names a scenario may use, in report order.
MIX_KEYS = (
    "lease_claim", "lease_renew", "lease_release", "edit", "guarded_edit", "refactor", "file_slash",
    "check_directory",
    "send_broadcast", "send_session", "send_tag", "send_file",
    "msg_recv", "msg_ack", "note_read", "drift_check", "room_who", "leave_room", "churn",
    "msg_unread", "msg_sent", "room_history", "lease_check", "lease_list", "rejoin", "set_cap",
    "renew_stale", "release_stale", "unread_paused", "stale_session", "ack_seen", "mode_change",
    "wake", "wake_idle", "wake_turn",
)
# The most spellings of one repository's path a scenario may ask for (each a symlink of the run).
MAX_SPELLINGS = 4
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,39}")
ROOM_RE = re.compile(r"[a-z0-9][a-z0-9._:/-]{0,63}")


@dataclass(frozen=True)
class Run:
    duration_s: float = 10.0
    seed: int = 1
    driver: Driver = "direct"
    busy_timeout_s: float = 5.0
    op_timeout_s: float = 20.0
    startup_timeout_s: float = 180.0
    drain_timeout_s: float = 60.0
    sample_interval_s: float = 0.5


@dataclass(frozen=True)
class Repo:
    name: str
    agents: int
    files: int = 8
    rooms: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    autonomy: str | None = None  # the level its agents join at; None: the store's default (or drawn, with rejoin)
    wake_lever: bool = False  # its agents join with a wake lever (the simulator's own; direct driver)
    # How many ways its agents spell its path: 2 or more gives some of them the repository
    # through a symlink the run makes (sim/run/layout.py), one file reached by two paths.
    spellings: int = 1
    # Spellings of src/ inside it (sim/run/layout.py's INNER): 2 adds alias/ (-> src), 3 also via/../ (via -> src/pkg)
    inner_spellings: int = 1
    move_src_at_s: float = 0.0  # src/ renamed src.moved/ under live leases, a symlink left (layout.py's move_src)
    keepers: int = 0  # its first agents that never let a lease go, renewing instead (sim/run/keeper.py)
    bind_mounts: int = 0  # its last this many agents work through a bind mount of it (sim/run/mounts.py)
    # The harness driver: each agent's CLI in turn (agent k runs harnesses[k % n]); empty: HARNESSES.
    harnesses: tuple[str, ...] = ()

    def harness_of(self, k: int) -> str:
        names = self.harnesses or HARNESSES
        return names[k % len(names)]


@dataclass(frozen=True)
class Workload:
    mode: Mode = "closed"
    hot_paths: int = 2
    hot_fraction: float = 0.5
    lease_ttl_s: tuple[int, ...] = (5,)
    shared_fraction: float = 0.2
    max_held: int = 2
    edit_margin_s: float = 0.5
    body_bytes: int = 64
    recv_limit: int = 20
    message_ttl_s: tuple[int, ...] = ()  # a send draws one; 0 sends without ttl_s
    wake_retry_s: float = 0.25  # the retry window a wake op passes (the shipped watcher's is 60 s)
    edits: Literal["claim", "check", "off"] = "claim"  # the edit guard guarded_edit asks: install's --edits
    think: Think = Think()
    mix: tuple[tuple[str, float], ...] = ()

    def weights(self) -> dict[str, float]:
        return dict(self.mix)

    def longest_lease_s(self) -> float:
        """The longest TTL a lease of the run may have (a 0 in ``lease_ttl_s``: the store's default)."""
        from agents_room.store.bounds import LEASE_TTL_DEFAULT

        return float(max(t or LEASE_TTL_DEFAULT for t in self.lease_ttl_s))


@dataclass(frozen=True)
class OpenLoop:
    rate_per_agent: float = 10.0
    arrivals: Literal["poisson", "uniform"] = "poisson"
    late_ms: float = 50.0


@dataclass(frozen=True)
class Expect:
    p99_ms: tuple[tuple[str, float], ...] = ()
    min_ops_per_s: float | None = None
    min_jain: float | None = None
    max_late_fraction: float | None = None
    max_store_busy_fraction: float | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Run
    repos: tuple[Repo, ...]
    workload: Workload
    open_loop: OpenLoop
    expect: Expect
    description: str = ""
    faults: Faults = Faults()
    hosts: Hosts | None = None  # [hosts]: simulated hosts and one PostgreSQL (sim/hosts/)
    fitted: Fitted | None = None  # [fitted]: the traffic `sim fit` measured, for the report to compare
    source: str = field(default="", compare=False)

    @property
    def agents(self) -> int:
        return sum(r.agents for r in self.repos)

    @property
    def shared_rooms(self) -> list[str]:
        return sorted({room for r in self.repos for room in r.rooms})

    @property
    def tags(self) -> list[str]:
        return sorted({t for r in self.repos for t in r.tags})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("source")
        out["workload"]["mix"] = dict(self.workload.mix)
        out["expect"]["p99_ms"] = dict(self.expect.p99_ms)
        out["faults"] = faultplan.to_dict(self.faults)
        out["hosts"] = hosts_to_dict(self.hosts)
        out.pop("fitted")  # written by fitted_to_toml, its own way
        return out

    def with_overrides(
        self, *, duration_s: float | None = None, agents: int | None = None, seed: int | None = None,
        driver: str | None = None, hosts: int | None = None, scale: int | None = None, edits: str | None = None,
    ) -> Scenario:
        """The scenario as run: command-line overrides checked like the file's own values.
        ``scale``: that many times each repo's agents (after ``agents``), each behaving the same."""
        run = self.run
        if duration_s is not None:
            run = dataclasses.replace(run, duration_s=number("--duration", duration_s, 0.5, 86_400))
        if seed is not None:
            run = dataclasses.replace(run, seed=int(seed))
        if driver is not None:
            run = dataclasses.replace(run, driver=choice("--driver", driver, DRIVERS))
            check_wake(self.repos, self.workload, run)
            check_harness(self.repos, run, self.faults, self.hosts, self.workload)
        plan = self.hosts
        if hosts is not None:
            if plan is None:
                raise ScenarioError("hosts: the scenario has no [hosts] table to set the count of")
            plan = dataclasses.replace(plan, count=integer("hosts", hosts, 1, 64))
        if agents is None and plan is not None and plan.agents_per_host:
            agents = plan.count * plan.agents_per_host
        repos = self.repos if agents is None else _spread(self.repos, integer("--agents", agents, 1, 512))
        if scale is not None:
            n = integer("--scale", scale, 1, 100)
            repos = tuple(dataclasses.replace(r, agents=integer(f"--scale: repo {r.name}'s agents", r.agents * n, 0, 512))
                          for r in repos)
        check_hosts(plan, self.faults.hosts, [k for k in self.faults.kinds() if k not in HOST_KINDS], run.duration_s)
        faultplan.check_fit(self.faults, duration_s=run.duration_s, driver=run.driver, busy_timeout_s=run.busy_timeout_s)
        work = self.workload if edits is None else dataclasses.replace(self.workload, edits=choice("--edits", edits, EDITS))
        return dataclasses.replace(self, run=run, repos=repos, hosts=plan, workload=work)


def _spread(repos: tuple[Repo, ...], total: int) -> tuple[Repo, ...]:
    """Scale the agents per repo to ``total``, keeping the proportions (largest remainder);
    a repo may end up with none when there are fewer agents than repos."""
    base = sum(r.agents for r in repos)
    shares = [r.agents * total / base for r in repos]
    counts = [math.floor(s) for s in shares]
    for i in sorted(range(len(repos)), key=lambda i: counts[i] - shares[i])[: total - sum(counts)]:
        counts[i] += 1
    return tuple(dataclasses.replace(r, agents=n) for r, n in zip(repos, counts, strict=True))


# -- strict reading ---------------------------------------------------------------------------


def _read_run(t: Table) -> Run:
    run = Run(
        duration_s=t.number("duration_s", Run.duration_s, 0.5, 86_400),
        seed=t.integer("seed", Run.seed, 0, 2**63 - 1),
        driver=t.choice("driver", Run.driver, DRIVERS),
        busy_timeout_s=t.number("busy_timeout_s", Run.busy_timeout_s, 0.05, 60),
        op_timeout_s=t.number("op_timeout_s", Run.op_timeout_s, 0.5, 600),
        startup_timeout_s=t.number("startup_timeout_s", Run.startup_timeout_s, 5, 3600),
        drain_timeout_s=t.number("drain_timeout_s", Run.drain_timeout_s, 1, 3600),
        sample_interval_s=t.number("sample_interval_s", Run.sample_interval_s, 0.05, 60),
    )
    t.done()
    if run.op_timeout_s <= run.busy_timeout_s:
        raise ScenarioError(
            f"[run] op_timeout_s: must exceed busy_timeout_s ({run.busy_timeout_s:g}), or every wait for the "
            f"write lock would look like a timeout; got {run.op_timeout_s:g}"
        )
    return run


def _read_repo(data: Any, i: int) -> Repo:
    t = Table(data, f"repos.{i}")
    name = t.take("name", kinds=(str,))
    if not NAME_RE.fullmatch(name):
        raise ScenarioError(f"[repos.{i}] name: {name!r} must match {NAME_RE.pattern}")
    repo = Repo(
        name=name,
        agents=t.integer("agents", ..., 0, 512),
        files=t.integer("files", Repo.files, 1, 10_000),
        rooms=t.names("rooms", ROOM_RE, "room name"),
        tags=t.names("tags", NAME_RE, "tag"),
        autonomy=_level(t, "autonomy"),
        wake_lever=t.take("wake_lever", False, kinds=(bool,)),
        spellings=t.integer("spellings", Repo.spellings, 1, MAX_SPELLINGS),
        inner_spellings=t.integer("inner_spellings", Repo.inner_spellings, 1, 3),
        move_src_at_s=t.number("move_src_at_s", Repo.move_src_at_s, 0.0, 86_400.0),
        keepers=t.integer("keepers", Repo.keepers, 0, 512),
        bind_mounts=t.integer("bind_mounts", Repo.bind_mounts, 0, 512),
        harnesses=t.names("harnesses", NAME_RE, "harness"),
    )
    for h in repo.harnesses:
        choice(f"[repos.{i}] harnesses", h, HARNESSES)
    if repo.bind_mounts > repo.agents:
        raise ScenarioError(f"[repos.{i}] bind_mounts: {repo.bind_mounts} is more than its {repo.agents} agents")
    t.done()
    return repo


def _level(t: Table, key: str) -> str | None:
    value = t.take(key, None, kinds=(str,))
    return value if value is None else choice(f"[{t.where}] {key}", value, ("hold", "notify", "wake"))


def _read_workload(t: Table) -> Workload:
    think = read_think(t.sub("think"))
    mix_t = t.sub("mix")
    mix = tuple((k, mix_t.number(k, 0, 0, 1e6)) for k in MIX_KEYS if k in mix_t.data)
    mix_t.done()
    if not any(w > 0 for _, w in mix):
        raise ScenarioError(f"[workload.mix] needs at least one positive weight among {', '.join(MIX_KEYS)}")
    ttl = t.take("lease_ttl_s", list(Workload.lease_ttl_s), kinds=(int, list))
    ttls = tuple(integer("[workload] lease_ttl_s", v, 0, 86_400) for v in (ttl if isinstance(ttl, list) else [ttl]))
    if not any(ttls):
        raise ScenarioError("[workload] lease_ttl_s: needs at least one TTL above 0 (0 leaves ttl_s out)")
    mttl = t.take("message_ttl_s", [], kinds=(int, list))
    mttls = tuple(integer("[workload] message_ttl_s", v, 0, 2_592_000) for v in (mttl if isinstance(mttl, list) else [mttl]))
    w = Workload(
        mode=t.choice("mode", Workload.mode, ("closed", "open")),
        message_ttl_s=mttls,
        hot_paths=t.integer("hot_paths", Workload.hot_paths, 0, 10_000),
        hot_fraction=t.number("hot_fraction", Workload.hot_fraction, 0, 1),
        lease_ttl_s=ttls,
        shared_fraction=t.number("shared_fraction", Workload.shared_fraction, 0, 1),
        max_held=t.integer("max_held", Workload.max_held, 1, 100),
        edit_margin_s=t.number("edit_margin_s", Workload.edit_margin_s, 0, 60),
        body_bytes=t.integer("body_bytes", Workload.body_bytes, 0, 65_536),
        recv_limit=t.integer("recv_limit", Workload.recv_limit, 1, 1000),
        wake_retry_s=t.number("wake_retry_s", Workload.wake_retry_s, 0.01, 3600),
        edits=t.choice("edits", Workload.edits, EDITS),
        think=think,
        mix=mix,
    )
    t.done()
    return w


def _read_open_loop(t: Table) -> OpenLoop:
    o = OpenLoop(
        rate_per_agent=t.number("rate_per_agent", OpenLoop.rate_per_agent, 0.01, 100_000),
        arrivals=t.choice("arrivals", OpenLoop.arrivals, ("poisson", "uniform")),
        late_ms=t.number("late_ms", OpenLoop.late_ms, 0, 600_000),
    )
    t.done()
    return o


def _read_expect(t: Table) -> Expect:
    p99_t = t.sub("p99_ms")
    p99 = tuple((k, p99_t.number(k, ..., 0.001, 3_600_000)) for k in sorted(p99_t.data))
    e = Expect(
        p99_ms=p99,
        min_ops_per_s=t.number("min_ops_per_s", None, 0, 1e9),
        min_jain=t.number("min_jain", None, 0, 1),
        max_late_fraction=t.number("max_late_fraction", None, 0, 1),
        max_store_busy_fraction=t.number("max_store_busy_fraction", None, 0, 1),
    )
    t.done()
    return e


def parse(text: str, name: str = "scenario") -> Scenario:
    """A scenario from TOML text; ``name`` is the default when the file sets none."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"not valid TOML: {exc}") from None
    top = Table(data, "")
    scenario_name = top.take("name", name, kinds=(str,))
    if not NAME_RE.fullmatch(scenario_name):
        raise ScenarioError(f"name: {scenario_name!r} must match {NAME_RE.pattern}")
    description = top.take("description", "", kinds=(str,))
    run = _read_run(top.sub("run"))
    repo_list = top.take("repos", ..., kinds=(list,))
    repos = tuple(_read_repo(r, i) for i, r in enumerate(repo_list))
    if not repos:
        raise ScenarioError("[[repos]] needs at least one repo")
    names = [r.name for r in repos]
    if len(set(names)) != len(names):
        raise ScenarioError(f"[[repos]] name: duplicate repo names in {names}")
    if sum(r.agents for r in repos) < 1:
        raise ScenarioError("[[repos]] agents: the repos have no agents between them")
    workload = _read_workload(top.sub("workload"))
    open_loop = _read_open_loop(top.sub("open_loop"))
    expect = _read_expect(top.sub("expect"))
    check_wake(repos, workload, run)
    faults = faultplan.read(top.sub("faults"))
    faultplan.check_fit(faults, duration_s=run.duration_s, driver=run.driver, busy_timeout_s=run.busy_timeout_s)
    fitted = read_fitted(top.sub("fitted")) if "fitted" in top.data else None
    host_plan = read_hosts(top.sub("hosts"))
    check_hosts(host_plan, faults.hosts, [k for k in faults.kinds() if k not in HOST_KINDS], run.duration_s)
    check_harness(repos, run, faults, host_plan, workload)
    if host_plan is not None and any(r.bind_mounts for r in repos):  # a host's agents live in its mount namespace
        raise ScenarioError("[[repos]] bind_mounts: not with [hosts] (each host's agents are in its own mount namespace)")
    top.done()
    for key, _ in expect.p99_ms:
        if key not in OPERATIONS and key != "all":
            raise ScenarioError(f"[expect.p99_ms] unknown operation {key!r}; one of all, {', '.join(OPERATIONS)}")
    scenario = Scenario(scenario_name, run, repos, workload, open_loop, expect, description, faults, host_plan,
                        fitted, source=text)
    if host_plan is not None and host_plan.agents_per_host:  # the file's own count of agents per host
        scenario = dataclasses.replace(scenario, repos=_spread(repos, host_plan.count * host_plan.agents_per_host))
    return scenario


def load(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return parse(text, path.stem)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


# Operations as they appear in the history (tool names, plus the real file write).
OPERATIONS = (
    "room_join", "room_who", "room_leave", "room_leave_room", "msg_send", "msg_recv", "msg_ack",
    "lease_claim", "lease_renew", "lease_release", "note_read", "drift_check", "edit", "guarded_edit", "wake",
)

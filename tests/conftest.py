"""Shared fixtures. Every test gets its own store under its own temporary folder; nothing
here (or anywhere in the tests) may touch ~/.agents-room."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Bytecode is kept, even where PYTHONDONTWRITEBYTECODE is set (some shells and containers set
# it): pytest keeps each test module it rewrote for its asserts as bytecode (tests/__pycache__,
# ignored by git), and without it every worker of every run rewrites and compiles all of them
# again: 8.3 s of CPU per worker on the 2-core machine, against 3.2 s once they are kept. Set
# before the imports below, so that the project's own modules are kept too, which the
# processes the tests start then read (they keep the variable: nothing of theirs is written).
sys.dont_write_bytecode = False

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from agents_room.store import Clock, Store  # noqa: E402

import pgcluster  # noqa: E402 (tests/ is on sys.path: rootdir conftest)
import slowness  # noqa: E402
from pgrequire import pytest_runtest_makereport  # noqa: E402, F401 (a PostgreSQL skip fails in CI)

# A test run started in a tmux pane: the servers the tests start are children of this process,
# whose environment carries the pane, and would take the terminal wake lever (and type into
# the developer's pane). Off for everything the tests start; the lever's own tests pass it
# their own panes.
os.environ["AGENTS_ROOM_TERMINAL_WAKE"] = "off"

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=False
)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: two workers for each core this process may use (``PYTEST_XDIST_AUTO_NUM_WORKERS``,
    when set, still decides). Much of the suite's time is spent waiting on other processes
    (servers over stdio, simulated agents, PostgreSQL's commits, the harness CLIs), so with a
    worker per core the cores idle part of the time. Measured on 2 cores, one machine, every test
    passing in each: 691 s with 2 workers and 613 s with 3 on an older tree; on 4d84cf0, 362 s with
    3 workers and 391 s with 4 under plain ``load`` distribution (one worker was handed the mutant
    matrix's last runs as a block and ran 110 s after the others had stopped), 364 s with 3 and
    330 s with 4 under ``--dist worksteal`` (pyproject.toml), where the four ended within 4 s."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201 (xdist's own types)
    """``--dist worksteal`` (pyproject.toml) with the longest tests started first, spread over
    the workers (tests/slowness.py, ``deal``; their seconds in tests/durations.txt): in
    collection order a block of long tests could be the last thing one worker runs while the
    others wait at the end. Any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "worksteal":
        return None
    from xdist.scheduler import WorkStealingScheduling

    class LongestFirst(WorkStealingScheduling):
        def schedule(self) -> None:
            if self.collection is not None or not self._check_nodes_have_same_collection():
                super().schedule()
                return
            self.collection = next(iter(self.node2collection.values()))
            # the first distribution hands each worker a contiguous block of ``pending``: in this order
            ids = list(self.collection)
            self.pending[:] = slowness.deal(ids, len(self.nodes), slowness.expected(),
                                            slowness.shared_modules(ids, config.rootpath))
            if self.collection:
                self.check_schedule()

    return LongestFirst(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests measured slow (tests/slow.txt, tests/slowness.py), so that
    ``-m "not slow"`` is the fast core whatever the test's own marks."""
    slow = slowness.listed()
    for item in items:
        if slowness.base(item.nodeid) in slow:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every default at the test's own folder, and drop harness variables that the
    developer's own session may carry."""
    monkeypatch.setenv("AGENTS_ROOM_DB", str(tmp_path / "default-store" / "room.db"))
    for name in ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR",
                 "AGENTS_ROOM_TOKEN", "CODEX_THREAD_ID"):
        monkeypatch.delenv(name, raising=False)


def make_repo(path: Path) -> Path:
    """A real git repository with one committed file."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text(f"# {path.name}\n")
    return path


@pytest.fixture
def cli_home():
    """A scratch HOME for a real harness CLI (tests/harnesscli.py), removed after the test."""
    from harnesscli import scratch_home  # only the harness tests pay for sim.harness's import

    path = scratch_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "alpha")


@pytest.fixture
def other_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "beta")


@pytest.fixture
def clock() -> Clock:
    """A pinned clock: tests move it with ``clock.shift(seconds)``."""
    return Clock(fixed=1_800_000_000.0)


@pytest.fixture
def store(tmp_path: Path, clock: Clock):
    s = Store.open(tmp_path / "store" / "room.db", clock=clock, busy_timeout_s=2.0)
    yield s
    s.close()


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for this test process (one per xdist worker), stopped
    at the end. Skipped where the machine has no server, unless AGENTS_ROOM_REQUIRE_POSTGRES=1
    (CI), where a missing server fails the tests that need it."""
    required = os.environ.get(pgcluster.REQUIRE_ENV) == "1"  # (a skip fails then anyway: pgrequire.py)
    try:
        import psycopg  # noqa: F401

        cluster = pgcluster.start_cluster()
    except (ImportError, LookupError, RuntimeError) as exc:
        if required:
            pytest.fail(f"PostgreSQL is required ({pgcluster.REQUIRE_ENV}=1) but not usable: {exc}")
        pytest.skip(f"no PostgreSQL server to test against: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop(wait=False)


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A fresh, empty schema of the cluster for one test, as an AGENTS_ROOM_DB URL."""
    return pgcluster.new_schema(pg_cluster)

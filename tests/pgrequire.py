"""With ``AGENTS_ROOM_REQUIRE_POSTGRES=1`` (``.ci/run``), a PostgreSQL test that ends skipped
fails instead: whatever skipped it (no server, no psycopg, an ``importorskip``, a ``skipif``),
the run must not pass green without having tested PostgreSQL.

A PostgreSQL test: one that uses the throwaway cluster (``pg_cluster``, ``pg_url``), runs on
the ``postgresql`` engine (tests/store/conftest.py), or is marked ``postgres_only``.

``tests/conftest.py`` imports the hook; ``-p pgrequire`` loads it alone (its own test does)."""

from __future__ import annotations

import os

import pytest

REQUIRE_ENV = "AGENTS_ROOM_REQUIRE_POSTGRES"


def is_postgres_test(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return bool(
        {"pg_cluster", "pg_url"} & set(getattr(item, "fixturenames", ()))
        or item.get_closest_marker("postgres_only")
        or (callspec is not None and callspec.params.get("engine") == "postgresql")
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(REQUIRE_ENV) == "1" and is_postgres_test(item):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"a PostgreSQL test was skipped, and {REQUIRE_ENV}=1 requires it to run: {reason}"

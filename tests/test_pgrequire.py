"""``AGENTS_ROOM_REQUIRE_POSTGRES=1`` turns a skipped PostgreSQL test into a failure (tests/
pgrequire.py), and leaves other skips alone: a real pytest run in a child on a small test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

CASES = '''
import pytest

@pytest.mark.postgres_only
def test_marked():
    pytest.skip("no server here")

def test_cluster(pg_url):
    pass

@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_engines(engine):
    pytest.skip("no engine")

def test_other():
    pytest.skip("nothing to do with PostgreSQL")

@pytest.fixture
def pg_url():
    pytest.skip("no cluster")
'''


def run(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_REQUIRE_POSTGRES"}
    if require is not None:
        env["AGENTS_ROOM_REQUIRE_POSTGRES"] = require
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # pgrequire alone: the installed plugins cost seconds to load
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "pgrequire", "-p", "no:cacheprovider", "-q",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", "-rfEs", "test_cases.py"],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)


def test_required_postgres_skips_fail(tmp_path: Path) -> None:
    done = run(tmp_path, "1")
    assert done.returncode == 1, done.stdout
    # A skip in a fixture's setup fails as an error; the sqlite engine and the other test still skip.
    assert "2 failed, 2 skipped, 1 error" in done.stdout, done.stdout
    for name in ("test_marked", "test_engines[postgresql]"):
        assert f"FAILED test_cases.py::{name}" in done.stdout, done.stdout
    assert "ERROR test_cases.py::test_cluster" in done.stdout, done.stdout
    assert "AGENTS_ROOM_REQUIRE_POSTGRES=1 requires it to run: no cluster" in done.stdout


@pytest.mark.parametrize("require", [None, "0"])
def test_without_the_requirement_they_skip(tmp_path: Path, require: str | None) -> None:
    done = run(tmp_path, require)
    assert done.returncode == 0 and "5 skipped" in done.stdout, done.stdout

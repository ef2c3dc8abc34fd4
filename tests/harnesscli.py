"""The real harness CLIs (Codex, Gemini CLI, Claude Code) for the end-to-end tests: where they
are (``sim.harness.clis``, shared with the simulator), and a scratch HOME and project for each
test.

``.ci/run`` installs each from npm into its own folder of a cache outside the clone
(``npm install --prefix $AGENTS_ROOM_NPM_CACHE/<name> <package>``); ``$AGENTS_ROOM_NPM_CACHE``
names that cache, default the one ``.ci/run`` uses. A CLI that is not there skips its tests,
except where ``.ci/run`` installed them (it sets ``AGENTS_ROOM_REQUIRE_HARNESS_CLIS=1``) or under
``CI=true``: there a missing one fails, so a registry that could not be reached never turns into
a quiet skip.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from sim.harness.clis import CACHE_ENV, DEFAULT_CACHE, cache, locate  # noqa: F401 (re-exported for the tests)

REQUIRE_ENV = "AGENTS_ROOM_REQUIRE_HARNESS_CLIS"
HARNESS = {"codex": "codex", "gemini": "gemini", "claude": "claude-code"}


def binary(name: str) -> str:
    """The CLI's executable (``codex``, ``gemini``, ``claude``, or a harness name); skips the
    test where it (or node) is missing, fails under CI."""
    found = locate(HARNESS.get(name, name))  # type: ignore[arg-type]
    if found.problem:
        if os.environ.get(REQUIRE_ENV) == "1" or os.environ.get("CI") == "true":
            pytest.fail(f"{name}: {found.problem}; .ci/run installs it")
        pytest.skip(f"{name}: {found.problem}")
    return found.path


def scratch_home() -> Path:
    """A HOME of its own under /var/tmp: the CLIs write config and caches under HOME, and
    Codex refuses to create its helper binaries under /tmp."""
    root = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix="agents-room-home-", dir=root))


def git_project(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "README.md").write_text(f"# {path.name}\n")
    return path


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """A plain environment for a CLI: no developer's keys, no harness markers; node on PATH."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    return {**keep, "HOME": str(home), "NO_COLOR": "1", "CI": "1", **extra}

"""One repository, two spellings, end to end on each engine: two agents' real MCP stdio servers,
one started in ``<d>/real/repo``, the other handed ``<d>/link/repo`` (``link -> real``) as its
project folder, contend for one file; a real ``git commit`` through the guard meets a lease taken
through the link (git names the work tree by its real path)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXE = str(Path(sys.executable).with_name("agents-room"))
KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine
# Each agent's server runs under a harness of its own (a process between it and the test), as
# two agents' servers do: the test's own git commit then descends from neither agent.
HARNESS = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "store" / "room.db")


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.fixture
def real(tmp_path: Path, location: str) -> Path:
    """``<d>/real/repo`` (committed, the guard installed), also reached as ``<d>/link/repo``."""
    top = Path(os.path.realpath(tmp_path))
    repo = top / "real" / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "lib").mkdir()
    for name in ("src/x.py", "lib/y.py", "docs.md"):
        (repo / name).write_text(f"{name}\n")
    assert git(repo, "init", "-q").returncode == 0
    git(repo, "add", "-A")
    assert git(repo, "commit", "-q", "-m", "first").returncode == 0
    done = subprocess.run([EXE, "--db", location, "guard", "install", "--repo", str(repo)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (top / "link").symlink_to(top / "real")
    return repo


def agent(location: str, cwd: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-c", HARNESS, EXE, "serve"],
                                 env={"AGENTS_ROOM_DB": location, **env}, cwd=str(cwd))


async def ok(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def test_agents_in_two_spellings_of_one_repository_contend_for_one_file(location: str, real: Path) -> None:
    link = real.parent.parent / "link" / "repo"
    x = str(real / "src" / "x.py")
    # Bob's harness shows its logical folder: the link, as its model would see it
    bob_env = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": KEY, "CLAUDE_PROJECT_DIR": str(link)}
    async with Client(agent(location, real)) as a, Client(agent(location, link.parent.parent, **bob_env)) as b:
        sa = (await ok(a, "room_join", label="alice"))["session_id"]
        joined = await ok(b, "room_join", label="bob")
        sb = joined["session_id"]
        assert joined["rooms"] == ["repo:repo"]
        who = {s["session_id"]: s["cwd"] for s in (await ok(a, "room_who", session_id=sa))["sessions"]}
        assert who == {sa: str(real), sb: str(real)}

        # the second exclusive claim is denied naming the first, whichever spelling
        granted = await ok(a, "lease_claim", session_id=sa, path="src/x.py")
        assert granted["ok"] and granted["lease"]["path"] == x
        for path in (f"{link}/src/x.py", "src/x.py"):
            denied = await ok(b, "lease_claim", session_id=sb, path=path)
            assert not denied["ok"] and denied["holder"]["session_id"] == sa and "alice" in denied["reason"], denied
        assert denied["lease"] is None
        first = await ok(b, "lease_claim", session_id=sb, path=f"{link}/src/x.py")
        assert first["reason"].startswith(f"{link}/src/x.py (the same file as {x}) is held exclusive by {sa}")

        # lease_check, file: sends and drift_check agree across the spellings
        for path in (f"{link}/src/x.py", x, "src/x.py"):
            state = await ok(b, "lease_check", session_id=sb, path=path)
            assert not state["free"] and state["lease"]["session_id"] == sa and state["lease"]["path"] == x
        for to in (f"file:{link}/src/x.py", f"file:{link}/src/*.py", "file:src/x.py"):
            assert (await ok(b, "msg_send", session_id=sb, to=to, body="soon?"))["recipients"] == [sa]
        await ok(b, "note_read", session_id=sb, path=f"{link}/src/x.py")
        (real / "src" / "x.py").write_text("changed by alice\n")
        drift = await ok(b, "drift_check", session_id=sb, path=x)
        assert (drift["severity"], drift["holder"], drift["baseline"]) == ("CRITICAL", sa, True)

        # directory leases: bob's lib/ through the link covers alice's lib/y.py
        held = await ok(b, "lease_claim", session_id=sb, path=f"{link}/lib/")
        assert held["ok"] and held["lease"]["path"] == f"{real}/lib/"
        beneath = await ok(a, "lease_claim", session_id=sa, path="lib/y.py")
        assert not beneath["ok"] and beneath["holder"]["session_id"] == sb and f"beneath {real}/lib/" in beneath["reason"]

        # a file leased through the link: a person's commit of it (paths as git gives them) is refused
        assert (await ok(b, "lease_claim", session_id=sb, path=f"{link}/docs.md"))["ok"]
        (real / "docs.md").write_text("changed\n")
        before = git(real, "rev-parse", "HEAD").stdout
        env = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_DB"}
        git(real, "add", "docs.md")
        done = git(link, "commit", "-q", "-m", "docs", env=env)
        assert done.returncode != 0 and "commit refused" in done.stderr, done.stderr
        assert "docs.md" in done.stderr and sb in done.stderr and "(bob)" in done.stderr
        assert git(real, "rev-parse", "HEAD").stdout == before
        await ok(b, "lease_release", session_id=sb, path="docs.md")  # released by another spelling
        assert git(link, "commit", "-q", "-m", "docs", env=env).returncode == 0

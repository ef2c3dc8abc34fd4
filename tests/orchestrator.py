"""An orchestrator, as a program that drives several agents is: one process hosting two
agents' MCP clients over stdio (two ``agents-room serve`` children, so both sessions record
this process as their harness process), which then runs real ``git commit`` itself.

    python orchestrator.py PLAN.json

PLAN (JSON): ``db`` (the store), ``repo`` (a work tree with the guard installed),
``agents`` (each ``label``, ``key`` for its room_join's harness_key, ``lease``, a path it
claims exclusively, and ``launcher``: true to start its server through a shell that stays its
parent) and ``commits`` (each ``paths`` to change and stage, and ``env`` added to
this process's environment for that commit). After each commit attempt the index is reset,
so every commit stages only its own paths. Prints one JSON object: this process's pid, each
label's session id, and each commit's exit code and standard error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

EXE = str(Path(sys.executable).with_name("agents-room"))
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content}")
    return result.structured_content


def commit(repo: str, paths: list[str], env: dict[str, str]) -> dict[str, Any]:
    for path in paths:
        with open(os.path.join(repo, path), "a") as f:
            f.write("changed\n")
    subprocess.run([*GIT, "add", "--", *paths], cwd=repo, check=True)
    done = subprocess.run([*GIT, "commit", "-q", "-m", "change"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    subprocess.run([*GIT, "reset", "-q"], cwd=repo, check=True)
    return {"code": done.returncode, "stderr": done.stderr}


async def run(plan: dict[str, Any]) -> dict[str, Any]:
    sessions = {}
    async with AsyncExitStack() as stack:
        for agent in plan["agents"]:
            # A launcher that stays the server's parent (as npx, uv run or a shell wrapper does): a
            # shell with more to do after the server, so it cannot exec it in its place.
            command, args = ("sh", ["-c", f'"{EXE}" serve; exit $?']) if agent.get("launcher") else (EXE, ["serve"])
            server = StdioServerParameters(command=command, args=args, env={"AGENTS_ROOM_DB": plan["db"]},
                                           cwd=plan["repo"])
            client = await stack.enter_async_context(Client(server))
            sid = (await call(client, "room_join", label=agent["label"], harness_key=agent["key"]))["session_id"]
            claimed = await call(client, "lease_claim", session_id=sid, path=agent["lease"])
            if not claimed["ok"]:
                raise SystemExit(f"{agent['label']} was refused {agent['lease']}: {claimed}")
            sessions[agent["label"]] = sid
        # The servers stay up (their sessions live) while this process commits.
        commits = [commit(plan["repo"], c["paths"], c.get("env", {})) for c in plan["commits"]]
    return {"pid": os.getpid(), "sessions": sessions, "commits": commits}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(anyio.run(run, json.load(f))))

"""Latency of ``lease_claim``: through the store alone, through the MCP adapter in memory (the
SDK's ``Client(server)``: the adapter's own cost, no transport), and through a real
``agents-room serve`` over stdio driven by the SDK's client. Each call claims a new path (a fresh grant, the
common case), one at a time; warm-up calls are not counted.

    .venv/bin/python bench/claim_latency.py [--n 2000] [--warmup 50]

Each run uses its own store in a temporary folder (never ~/.agents-room).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
import numpy as np
from mcp import Client, StdioServerParameters

from agents_room.harnesses.identity import Identity
from agents_room.server import RoomServer, build_server
from agents_room.store import Store

EXE = str(Path(sys.executable).with_name("agents-room"))


def in_process(db: Path, cwd: Path, n: int, warmup: int) -> np.ndarray:
    with Store.open(db) as store:
        sid = store.room_join(cwd=str(cwd), pid=os.getpid(), label="bench").session_id
        for i in range(warmup):
            store.lease_claim(sid, f"warm/{i}.py")
        out = np.empty(n)
        for i in range(n):
            start = time.perf_counter_ns()
            claim = store.lease_claim(sid, f"src/file_{i}.py")
            out[i] = time.perf_counter_ns() - start
            assert claim.ok
    return out / 1e6


async def through_mcp(target: StdioServerParameters | RoomServer, n: int, warmup: int) -> np.ndarray:
    async with Client(target) as client:
        joined = await client.call_tool("room_join", {"label": "bench"})
        sid = joined.structured_content["session_id"]
        for i in range(warmup):
            await client.call_tool("lease_claim", {"session_id": sid, "path": f"warm/{i}.py"})
        out = np.empty(n)
        for i in range(n):
            start = time.perf_counter_ns()
            result = await client.call_tool("lease_claim", {"session_id": sid, "path": f"src/file_{i}.py"})
            out[i] = time.perf_counter_ns() - start
            assert not result.is_error and result.structured_content["ok"], result.content
    return out / 1e6


def line(name: str, ms: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return f"{name:<15}{len(ms):>6}{p50:>10.3f}{p90:>10.3f}{p99:>10.3f}{ms.max():>10.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="timed calls per path (default 2000)")
    ap.add_argument("--warmup", type=int, default=50, help="untimed calls first (default 50)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="claim-bench-") as tmp:
        folder = Path(tmp)
        (folder / "repo" / ".git").mkdir(parents=True)
        store_ms = in_process(folder / "store.db", folder / "repo", args.n, args.warmup)
        repo = folder / "repo"
        memory = build_server(folder / "memory.db", identity=Identity(str(repo), os.getpid(), "bench", None))
        memory_ms = anyio.run(through_mcp, memory, args.n, args.warmup)
        stdio = StdioServerParameters(
            command=EXE, args=["serve"], env={"AGENTS_ROOM_DB": str(folder / "stdio.db")}, cwd=str(repo)
        )
        stdio_ms = anyio.run(through_mcp, stdio, args.n, args.warmup)
    print(f"lease_claim latency, ms ({os.cpu_count()} CPUs, Python {sys.version.split()[0]})")
    print(f"{'path':<15}{'calls':>6}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}")
    print(line("store", store_ms))
    print(line("MCP in memory", memory_ms))
    print(line("MCP stdio", stdio_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A throwaway PostgreSQL cluster for the tests (and bench/): initdb into a temporary folder,
``pg_ctl start`` on a private Unix socket folder and a free loopback port, ``pg_ctl -m
immediate stop`` at the end. Nothing of the machine's own clusters is touched.

``fsync=off``: a throwaway cluster need not survive the machine's crash, and a kill -9 of the
server still keeps every commit that reached the OS; every commit is still a real commit
(the store's sessions keep the server's ``synchronous_commit``).

``initdb`` refuses to run as root: as root the cluster is made and run by the ``postgres``
user, in a folder that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REQUIRE_ENV = "AGENTS_ROOM_REQUIRE_POSTGRES"


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: pg_config's BINDIR, else the newest
    /usr/lib/postgresql/*/bin, else PATH. None when the machine has no server."""
    candidates: list[str] = []
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            candidates.append(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                             check=True).stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    if shutil.which("initdb"):
        candidates.append(str(Path(shutil.which("initdb")).parent))  # type: ignore[arg-type]
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    bindir: Path
    root: Path
    port: int
    user: str
    fsync: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockets(self) -> Path:
        return self.root / "sockets"

    def url(self, dbname: str = "postgres") -> str:
        """A URL over the Unix socket (no TCP handshake, no password: -A trust)."""
        return f"postgresql://{self.user}@/{dbname}?host={self.sockets}&port={self.port}"

    def tcp_url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> None:
        self.sockets.mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            for p in (self.root, self.sockets):
                os.chown(p, entry.pw_uid, entry.pw_gid)
        done = self._run("initdb", "-A", "trust", "-U", self.user, "--no-locale", "-E", "UTF8", "--no-sync",
                         "-D", str(self.data))
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.sockets} "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=300 -c shared_buffers=64MB")
        done = self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "start")
        if done.returncode:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {log[-2000:]}")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(user: str = "agents", *, fsync: bool = False) -> Cluster:
    """Start a private cluster; raises RuntimeError when it cannot, LookupError when the
    machine has no PostgreSQL binaries."""
    bindir = find_bindir()
    if bindir is None:
        raise LookupError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    root = Path(tempfile.mkdtemp(prefix="agents-room-pg-"))
    cluster = Cluster(bindir, root, _free_port(), user, fsync)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def new_schema(cluster: Cluster) -> str:
    """Create an empty schema (faster than a database: ~5 ms) and return a store URL whose
    search_path is that schema."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{cluster.url()}&options=-csearch_path%3D{name}"


def wait_ready(url: str, seconds: float = 10.0) -> None:
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        try:
            psycopg.connect(url).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)

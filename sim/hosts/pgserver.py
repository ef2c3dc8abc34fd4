"""A throwaway PostgreSQL cluster inside the database's network namespace, listening on its
198.18 address only: the one database every simulated host reaches over its link.

``initdb`` refuses root, so the cluster is made and run by the ``postgres`` user in a folder
it owns (as ``tests/pgcluster.py`` does for the test suite). ``fsync=off``: a killed server
still keeps every commit that reached the kernel, which is what the ``pg_kill`` fault tests
(a crash of the machine is not simulated).

The server drops a client it cannot reach within seconds (TCP keepalives and
``tcp_user_timeout``), so a host cut off in the middle of a transaction does not hold the
store's write lock for the kernel's default two hours.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .net import RANGE, kill_netns_processes, sh
from .pidns import Host

PORT = 5432
USER = "agents"
# What a client needs to notice a cut-off server within seconds instead of hanging: libpq's
# keepalives and TCP user timeout (the store's own statement bounds run on the server).
CLIENT_PARAMS = "connect_timeout=3&keepalives=1&keepalives_idle=1&keepalives_interval=1&keepalives_count=3" \
                "&tcp_user_timeout=4000"
SERVER_OPTS = [f"-c{o}" for o in ("fsync=off", "max_connections=400", "shared_buffers=64MB", "tcp_keepalives_idle=1",
                                  "tcp_keepalives_interval=1", "tcp_keepalives_count=3", "tcp_user_timeout=4000")]


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl, else PATH's."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    if shutil.which("initdb"):
        found.append(str(Path(shutil.which("initdb")).parent))  # type: ignore[arg-type]
    return next((Path(f) for f in found if (Path(f) / "initdb").exists() and (Path(f) / "pg_ctl").exists()), None)


@dataclass
class PgServer:
    netns: str
    address: str
    root: Path
    bindir: Path
    proc: subprocess.Popen | None = None  # nsenter -> runuser -> postgres (the postmaster)
    ns: Host = None  # type: ignore[assignment]  # its own PID namespace, whose init reaps the orphans

    def __post_init__(self) -> None:
        if self.ns is None:
            self.ns = Host(-1, "db", self.netns, self.address)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, *, client_params: bool = True) -> str:
        base = f"postgresql://{USER}@{self.address}:{PORT}/postgres"
        return f"{base}?{CLIENT_PARAMS}" if client_params else base

    def _as_postgres(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return sh(*cmd, netns=self.netns, check=False)

    @classmethod
    def create(cls, netns: str, address: str) -> PgServer:
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine; "
                               "install Debian's postgresql package")
        root = Path(tempfile.mkdtemp(prefix="agents-room-hosts-pg-"))
        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
        (root / "sockets").mkdir()
        os.chown(root / "sockets", entry.pw_uid, entry.pw_gid)
        server = cls(netns, address, root, bindir)
        done = server._as_postgres("initdb", "-A", "trust", "-U", USER, "--no-locale", "-E", "UTF8", "--no-sync",
                                   "-D", str(server.data))
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        with open(server.data / "pg_hba.conf", "a") as hba:  # the simulated hosts, and nobody else
            hba.write(f"host all all {RANGE} trust\n")
        server.start()
        return server

    def start(self) -> float:
        """Start (or restart after a kill: crash recovery) and wait until it takes connections;
        returns the seconds it took. The server runs in a PID namespace of its own, whose init
        reaps its orphans: a killed server leaves no zombie whose pid would block the restart."""
        import psycopg

        t0 = time.monotonic()
        if not self.ns.init_pid:
            self.ns.start(sys.executable)
        opts = ["-c", f"listen_addresses={self.address}", "-c", f"port={PORT}",
                "-c", f"unix_socket_directories={self.root}/sockets", *SERVER_OPTS]
        cmd = self.ns.command(["runuser", "-u", "postgres", "--", str(self.bindir / "postgres"), "-D", str(self.data),
                               *opts])
        with open(self.root / "log", "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return time.monotonic() - t0
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.root / "log").read_text()[-2000:]
                    raise RuntimeError(f"PostgreSQL in {self.netns} did not start: {log}") from None
                time.sleep(0.05)

    def pids(self) -> list[int]:
        return [int(p) for p in sh("ip", "netns", "pids", self.netns, check=False).stdout.split()]

    def kill(self) -> int:
        """SIGKILL every process of the server (postmaster and backends: the init of its PID
        namespace dies, so the kernel kills and reaps them all); returns how many there were."""
        n = self.ns.kill_all()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        return n

    def pause(self) -> int:
        """SIGSTOP every process of the server: connections stay open, nothing answers."""
        return len(kill_netns_processes(self.netns, signal.SIGSTOP))

    def resume(self) -> int:
        return len(kill_netns_processes(self.netns, signal.SIGCONT))

    def stop(self) -> None:
        self.resume()
        self.kill()

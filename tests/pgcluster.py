"""A throwaway PostgreSQL cluster for the tests (and bench/): a copy of an initialised data
folder in a temporary folder, ``pg_ctl start`` on a private Unix socket folder and a free
loopback port, ``pg_ctl -m immediate stop`` at the end. Nothing of the machine's own clusters
is touched. The data folder is made by ``initdb`` once per machine, binaries and user
(``agents-room-pgdata-template-*`` in the temporary folder, never started), and copied: a copy
takes 0.16 s where initdb took 2.2 s on the loaded 2-core machine, for every cluster a run starts.

``fsync=off``: a throwaway cluster need not survive the machine's crash, and a kill -9 of the
server still keeps every commit that reached the OS; every commit is still a real commit
(the store's sessions keep the server's ``synchronous_commit``).

``initdb`` refuses to run as root: as root the cluster is made and run by the ``postgres``
user (``nobody`` where there is none: the ``pgserver`` binaries on a machine without a
PostgreSQL package), in a folder that user owns. Binaries that user cannot reach (the
``pgserver`` wheel's, inside a clone whose parent folder only its owner may enter) are copied
into the cluster's folder first.

A test process killed before its end (``kill -9``, a CI timeout) cannot stop its cluster, and
the server runs on. Each cluster's folder holds ``owner``: the pid and start time of the
process that started it; ``start_cluster`` first reaps (stops, removes) the clusters whose
owner is gone. A folder without that file is never touched.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
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
BINDIR_ENV = "AGENTS_ROOM_PG_BINDIR"  # the server binaries to use (a folder with initdb and pg_ctl)
PREFIX = "agents-room-pg-"
TEMPLATE = "agents-room-pgdata-template-"  # an initialised data folder, copied by each new cluster
OWNER = "owner"  # "<pid> <start time in clock ticks>" of the process that started the cluster


def pgserver_bindir() -> Path | None:
    """The server binaries PyPI's ``pgserver`` wheel ships (a dev dependency), if installed:
    found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / "pginstall" / "bin" / "initdb").exists():
            return Path(folder) / "pginstall" / "bin"
    return None


def find_bindir() -> Path | None:
    """The folder holding initdb and pg_ctl: ``$AGENTS_ROOM_PG_BINDIR`` if set, else pg_config's
    BINDIR, else the newest /usr/lib/postgresql/*/bin, else PATH, else the ``pgserver`` wheel's.
    None when none has a server."""
    if os.environ.get(BINDIR_ENV):
        return Path(os.environ[BINDIR_ENV])
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
    return pgserver_bindir()


def _server_user() -> str:
    """Who runs the server when this process is root (initdb refuses root)."""
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        return "nobody"


def reachable(user: str, program: Path) -> bool:
    """Whether ``user`` may run ``program``: every folder on its way must let that user in,
    which a clone under a folder of mode 700 (``mktemp -d``, many home folders) does not."""
    return subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(program)], check=False).returncode == 0


def copy_install(bindir: Path, to: Path, uid: int, gid: int) -> Path:
    """Copy the installation around ``bindir`` to ``to``, owned by ``uid``/``gid``, and return
    the copy's binaries folder. The server finds its ``lib`` and ``share`` folders beside its
    ``bin``; a wheel's binaries (``pgserver``'s) also link to the libraries auditwheel moved
    into ``<package>.libs`` beside the package, by an rpath relative to the binaries: the copy
    keeps the path between the two."""
    install = bindir.parent
    anchor = next((p for p in list(install.parents)[:3] if any(p.glob("*.libs"))), install)
    parts = [install / name for name in (bindir.name, "lib", "share")] + sorted(anchor.glob("*.libs"))
    for part in parts:
        if part.is_dir():
            shutil.copytree(part, to / part.relative_to(anchor), symlinks=True)
    os.chown(to, uid, gid)
    for folder, dirs, files in os.walk(to):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)
    return to / bindir.relative_to(anchor)


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

    @property
    def copied_bin(self) -> Path:
        """A link to the copy ``start`` makes of binaries the server user cannot reach (the
        copy is inside the cluster's folder: ``reap`` stops a cluster with it too)."""
        return self.root / "bin"

    def _bin(self) -> Path:
        return self.copied_bin if self.copied_bin.exists() else self.bindir

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self._bin() / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", _server_user(), "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> None:
        self.sockets.mkdir()
        if os.geteuid() == 0:
            entry = pwd.getpwnam(_server_user())
            for p in (self.root, self.sockets):
                os.chown(p, entry.pw_uid, entry.pw_gid)
            if not reachable(_server_user(), self.bindir / "initdb"):
                self.copied_bin.symlink_to(copy_install(self.bindir, self.root / "install", entry.pw_uid,
                                                        entry.pw_gid))
        # A copy of the data folder initdb made before: a tenth of initdb's time, for each cluster
        subprocess.run(["cp", "-a", str(self._template()), str(self.data)], check=True)
        for attempt in range(3):
            try:
                self.resume()
                return
            except RuntimeError as exc:
                if "could not bind" not in str(exc) or attempt == 2:
                    raise
                # the free port was taken between our look and the server's bind (another
                # worker's server, any test's listener): another one
                self.port = _free_port()

    def _template(self) -> Path:
        """The data folder ``initdb`` makes for these binaries and this user, made once per
        machine (beside the clusters, under its own prefix: never reaped) and then only read."""
        made = (self._bin() / "initdb").stat()  # the binaries by what they are, not where (a copy keeps its mtime)
        key = hashlib.sha256(f"{made.st_mtime_ns}:{made.st_size}:{self.user}:{self.root.stat().st_uid}"
                             .encode()).hexdigest()[:16]
        template = Path(tempfile.gettempdir()) / f"{TEMPLATE}{key}"
        if not (template / "data" / "PG_VERSION").exists():
            making = Path(tempfile.mkdtemp(prefix=f"{TEMPLATE}{key}-making-"))
            os.chown(making, self.root.stat().st_uid, self.root.stat().st_gid)
            done = self._run("initdb", "-A", "trust", "-U", self.user, "--no-locale", "-E", "UTF8", "--no-sync",
                             "-D", str(making / "data"))
            if done.returncode:
                shutil.rmtree(making, ignore_errors=True)
                raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
            if not (template / "data" / "PG_VERSION").exists():  # a husk a temporary-file cleaner left
                shutil.rmtree(template, ignore_errors=True)
            try:
                os.rename(making, template)  # whole or not at all; another process may have won
            except OSError:
                shutil.rmtree(making, ignore_errors=True)
        return template / "data"

    def resume(self) -> None:
        """Start the server of an initialised cluster (again, after ``halt``)."""
        opts = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.sockets} "
                f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=300 -c shared_buffers=64MB")
        done = self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "start")
        if done.returncode:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {log[-2000:]}")

    def halt(self) -> None:
        """Stop the server as a crash would, keeping the cluster (``resume`` starts it again)."""
        done = self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        if done.returncode:
            raise RuntimeError(f"pg_ctl stop failed: {done.stderr.strip()}")

    def stop(self, *, wait: bool = True) -> None:
        """Stop the server and remove the cluster's folder; ``wait=False``: removed by a process
        of its own that the caller does not wait for (a worker's cluster holds every schema its
        tests made: tens of thousands of files, seconds to remove at the very end of a run)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        if wait:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            # (sh starts rm in the background and exits at once: nothing is left for this process to wait for)
            subprocess.run(["sh", "-c", 'rm -rf -- "$1" &', "sh", str(self.root)], start_new_session=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def _started(pid: int) -> str | None:
    """The start time of process ``pid`` (field 22 of /proc/PID/stat), None if there is none:
    with the pid, it names one process even after the pid is reused."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_alive(root: Path) -> bool | None:
    """Whether the process that started the cluster in ``root`` still runs; None when the
    folder names no owner (not ours to judge)."""
    try:
        pid, started = (root / OWNER).read_text().split()
        return _started(int(pid)) == started
    except (OSError, ValueError):
        return None


def reap(bindir: Path, base: Path | None = None) -> list[Path]:
    """Stop and remove every cluster under ``base`` (the temp folder) whose owner is gone."""
    reaped = []
    for root in sorted(Path(base or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        if owner_alive(root) is False:
            Cluster(bindir, root, 0, "").stop()
            reaped.append(root)
    return reaped


def start_cluster(user: str = "agents", *, fsync: bool = False) -> Cluster:
    """Start a private cluster, owned by this process (after reaping those of dead owners);
    raises RuntimeError when it cannot, LookupError when the machine has no PostgreSQL binaries."""
    bindir = find_bindir()
    if bindir is None:
        raise LookupError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    reap(bindir)
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    (root / OWNER).write_text(f"{os.getpid()} {_started(os.getpid())}\n")
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

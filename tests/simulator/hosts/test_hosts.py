"""Simulated hosts for real: network namespaces on a bridge with 198.18.0.0/15 addresses, a PID
namespace per host, PostgreSQL in a namespace of its own; a partition that really drops the
packets; everything removed at the end, after SIGTERM, and (by the next start) after SIGKILL
of the runner. Needs root; without it, the refusal is what is tested."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sim.hosts import net
from sim.hosts.cluster import Hosts

ROOT = Path(__file__).resolve().parents[3]
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root")


def netns_names() -> set[str]:
    return {line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
            .stdout.splitlines() if line.strip()}


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def gone(rec: net.Record) -> bool:
    names = netns_names()
    return (not any(ns in names for ns in rec.netns) and not any(f" {link}" in links() for link in rec.links)
            and not rec.path.exists() and not any(Path(d).exists() for d in rec.dirs))


def on_host(hosts: Hosts, i: int, code: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hosts.hosts[i].command([sys.executable, "-c", textwrap.dedent(code)], cwd="/tmp"),
                          capture_output=True, text=True, timeout=timeout)


PROBE = """
import os, sys, time, psycopg
t = time.monotonic()
try:
    with psycopg.connect(sys.argv[1] if len(sys.argv) > 1 else %r) as c:
        print("db", c.execute("select inet_client_addr()").fetchone()[0])
except psycopg.OperationalError as e:
    print("cut", round(time.monotonic() - t, 1))
print("pid", os.getpid(), "procs", len([p for p in os.listdir("/proc") if p.isdigit()]),
      "host", os.environ.get("AGENTS_ROOM_HOST_ID"))
"""


@root_only
def test_hosts_are_namespaces_with_their_own_proc_and_a_link_that_can_be_cut() -> None:
    with Hosts.create(2) as hosts:
        rec = hosts.net.record
        assert ipaddress.ip_network(rec.subnet).subnet_of(net.RANGE)
        assert set(rec.netns) <= netns_names() and rec.path.exists()
        assert ipaddress.ip_address(hosts.db.address) in net.RANGE
        seen = on_host(hosts, 1, PROBE % hosts.url)
        assert f"db {hosts.net.host_addr(1)}" in seen.stdout, seen  # over its own link, from its own address
        words = seen.stdout.split()
        # Its own PID namespace: it is a low pid, and /proc shows the host's init and itself.
        assert int(words[words.index("pid") + 1]) < 10 and int(words[words.index("procs") + 1]) <= 3, seen.stdout
        hosts.net.partition(0)
        assert hosts.net.partitioned(0) and not hosts.net.partitioned(1)
        cut = on_host(hosts, 0, PROBE % hosts.url)
        assert "cut" in cut.stdout and "db " not in cut.stdout, cut  # dropped: a timeout, not a refusal
        assert float(cut.stdout.split()[1]) >= 2.5, cut.stdout
        assert "db " in on_host(hosts, 1, PROBE % hosts.url).stdout  # the other host still reaches it
        hosts.net.heal(0)
        assert f"db {hosts.net.host_addr(0)}" in on_host(hosts, 0, PROBE % hosts.url).stdout
    assert gone(rec)


@root_only
def test_kill_host_kills_every_process_of_it_and_the_database_survives_a_kill() -> None:
    import psycopg

    with Hosts.create(2) as hosts:
        sleepers = [subprocess.Popen(hosts.hosts[0].command(["sleep", "60"])) for _ in range(3)]
        other = subprocess.Popen(hosts.hosts[1].command(["sleep", "60"]))
        deadline = time.monotonic() + 10
        while len(hosts.hosts[0].pids()) < 4 and time.monotonic() < deadline:  # init + 3 sleepers
            time.sleep(0.05)
        assert len(hosts.hosts[0].pids()) == 4
        assert hosts.restart_host(hosts.hosts[0]) == 4
        for s in sleepers:
            assert s.wait(timeout=10) != 0  # killed, through nsenter
        assert other.poll() is None  # another host untouched
        assert len(hosts.hosts[0].pids()) == 1  # back, with a fresh init only
        with psycopg.connect(hosts.url, autocommit=True) as c:
            c.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")
        assert hosts.db.kill() >= 2  # postmaster and its backends
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(hosts.url, connect_timeout=1).close()
        hosts.db.start()
        with psycopg.connect(hosts.url) as c:
            assert c.execute("SELECT x FROM kept").fetchall() == [(7,)]  # committed work survived
        assert hosts.db.pause() >= 2
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(hosts.url, connect_timeout=1).close()  # stopped: nobody answers
        hosts.db.resume()
        with psycopg.connect(hosts.url) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        other.kill()
        other.wait()


RUNNER = """
import sys, time
from sim.hosts.cluster import Hosts
hosts = Hosts.create(1)
try:  # the line is printed inside: the test's SIGTERM may land while print returns
    print(hosts.net.record.run_id, flush=True)
    time.sleep(120)
finally:
    hosts.close()
"""


def _runner_made() -> tuple[subprocess.Popen[str], net.Record]:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    run_id = proc.stdout.readline().strip()  # type: ignore[union-attr]
    assert run_id, "the runner made no hosts"
    import json

    return proc, net.Record(**json.loads((net.REGISTRY / f"{run_id}.json").read_text()))


@root_only
def test_sigterm_of_the_runner_removes_everything() -> None:
    proc, rec = _runner_made()
    assert set(rec.netns) <= netns_names()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    proc.stdout.close()  # type: ignore[union-attr]
    assert gone(rec)


@root_only
def test_what_a_killed_runner_left_is_reaped_at_the_next_start() -> None:
    proc, rec = _runner_made()
    proc.kill()  # no handler runs: the namespaces, links, database and registry file stay
    proc.wait()
    proc.stdout.close()  # type: ignore[union-attr]
    assert set(rec.netns) <= netns_names() and rec.path.exists()
    assert rec.run_id in net.reap()
    assert gone(rec)


NOBODY = """
import os, sys, locale, gettext, argparse, importlib, pkgutil  # read now: the interpreter's own files are root's
import sim, agents_room
# Every module of the project read now, as root: the clone (and its venv) may sit in a folder
# only root may enter, and sim imports most of its modules only when a command needs them.
for package in (sim, agents_room):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not module.name.endswith(".__main__"):
            importlib.import_module(module.name)
from sim.cli import main
os.setgroups([]); os.setgid(65534); os.setuid(65534)  # a user without root, in this very process
sys.exit(main(sys.argv[1:]))
"""


@root_only
def test_without_root_sim_refuses_in_one_line(tmp_path: Path) -> None:
    import shutil
    import tempfile
    import uuid

    # An --out that user may make, and the scenario where that user may read it (tmp_path's
    # folders, and maybe the clone's, are root's alone; --out is checked first).
    out = Path(tempfile.gettempdir()) / f"agents-room-nobody-{uuid.uuid4().hex}" / "out"
    shared = Path(tempfile.mkdtemp(prefix="agents-room-scenario-"))
    try:
        shared.chmod(0o755)
        scenario = Path(shutil.copy(ROOT / "scenarios" / "two-hosts.toml", shared / "two-hosts.toml"))
        scenario.chmod(0o644)
        done = subprocess.run([sys.executable, "-c", NOBODY, "run", str(scenario), "--out", str(out), "--no-live"],
                              capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(shared)
    assert not out.parent.exists()
    assert done.returncode == 2, done
    assert done.stderr.strip() == ("sim: simulated hosts need root (network namespaces, veth links, iptables, PID "
                                   "namespaces); run sim as root, or drop the scenario's [hosts] table")


@root_only
def test_a_hosts_http_server_takes_its_token_only_and_comes_back_with_its_host(tmp_path: Path) -> None:
    import uuid

    from sim.run.drivers import HttpDriver, OpError, serve_command

    repo = tmp_path / "alpha"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    with Hosts.create(1) as hosts:
        host = hosts.hosts[0]
        env = {**os.environ, "AGENTS_ROOM_DB": hosts.url, "AGENTS_ROOM_HOST_ID": host.name}
        server = hosts.http_server(host, 0, serve_command(), repo, env, tmp_path / "serve.log")
        assert server.url == f"http://{host.address}:8700/mcp"
        assert hosts.http_server(host, 0, serve_command(), repo, env, tmp_path / "serve.log") is server  # one per repo
        key = str(uuid.uuid4())
        driver = HttpDriver(server.url, hosts.token, 20)
        try:
            joined = driver.call("room_join", {"label": "a00", "harness": "sim", "harness_key": key})
        finally:
            driver.close()
        with pytest.raises(Exception):  # noqa: B017,PT011 (refused at the transport: 401)
            HttpDriver(server.url, "not-the-token", 10).call("room_who", {"session_id": joined["session_id"]})
        old = server.proc.pid  # type: ignore[union-attr]
        hosts.restart_host(host)  # kill_host: the server dies with its host and comes back
        assert server.proc.pid != old and server.proc.poll() is None  # type: ignore[union-attr]
        again = HttpDriver(server.url, hosts.token, 20)
        try:  # a rejoin by harness key: the same session, through the new server
            assert again.call("room_join", {"label": "a00", "harness": "sim", "harness_key": key})["session_id"] \
                == joined["session_id"]
            with pytest.raises(OpError):
                again.call("room_who", {"session_id": "f" * 16})
        finally:
            again.close()

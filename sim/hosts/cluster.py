"""All the simulated hosts of one run, made and removed as one (:class:`Hosts`).

``Hosts.create`` reaps what dead runners left, builds the network, starts the database in its
namespace and a PID namespace per host; ``close`` removes every process, namespace, link and
folder it made, and is safe to call twice. While it is open, SIGTERM and SIGHUP end the
runner as Ctrl-C does (``KeyboardInterrupt``), so the ``finally`` that closes it runs; a
runner killed outright leaves its registry file, and the next start reaps it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .net import Network, reap
from .pgserver import PgServer
from .pidns import Host
from .serve import HttpServer, server_for

TOOLS = ("ip", "iptables", "unshare", "nsenter", "runuser")


def refusal() -> str | None:
    """Why simulated hosts cannot be made here, in one line, or None."""
    if os.geteuid() != 0:
        return ("simulated hosts need root (network namespaces, veth links, iptables, PID namespaces); "
                "run sim as root, or drop the scenario's [hosts] table")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"simulated hosts need {', '.join(missing)} on PATH (Debian: apt-get install iproute2 iptables util-linux)"
    return None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@dataclass
class Hosts:
    net: Network
    db: PgServer
    hosts: list[Host]
    _handlers: dict[int, Any] = field(default_factory=dict)
    closed: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))  # every http server's bearer token
    servers: dict[tuple[int, int], HttpServer] = field(default_factory=dict)  # (host, repo) -> serve --http

    @classmethod
    def create(cls, n_hosts: int) -> Hosts:
        why = refusal()
        if why:
            raise PermissionError(why)
        reap()
        net = Network.create(n_hosts)
        made = cls(net, None, [])  # type: ignore[arg-type]
        made._trap()
        try:
            made.db = PgServer.create(net.db_netns, net.db_addr)
            net.record.dirs.append(str(made.db.root))
            net.record.save()
            for i in range(n_hosts):
                host = Host(i, f"h{i}", net.netns(i), net.host_addr(i))
                host.start(sys.executable)
                made.hosts.append(host)
        except BaseException:
            made.close()
            raise
        return made

    def _trap(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._handlers[sig] = signal.signal(sig, _interrupt)
            except ValueError:  # not the main thread: the registry and reap cover it
                pass

    @property
    def url(self) -> str:
        """The store, as the agents reach it over their link."""
        return self.db.url()

    def host_of(self, agent_no: int) -> Host:
        return self.hosts[agent_no % len(self.hosts)]

    def http_server(self, host: Host, repo_index: int, command: str, cwd: Path, env: dict[str, str],
                    log: Path) -> HttpServer:
        """The host's ``agents-room serve --http`` for repository ``repo_index``, started on first use."""
        key = (host.index, repo_index)
        if key not in self.servers:
            server = server_for(host, repo_index, command, cwd, {**env, "AGENTS_ROOM_TOKEN": self.token}, log)
            server.start()
            self.servers[key] = server
        return self.servers[key]

    def restart_host(self, host: Host) -> int:
        """``kill_host``: every process of the host killed at once, then a fresh PID namespace,
        and the host's http servers started again in it."""
        killed = host.kill_all()
        host.generation += 1
        host.start(sys.executable)
        for (i, _), server in self.servers.items():
            if i == host.index:
                server.reap()
                server.start()
        return killed

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for host in self.hosts:
            if host.init_pid:
                host.kill_all()
        for server in self.servers.values():
            server.reap()
        if self.db is not None:
            self.db.stop()
        self.net.close()  # namespaces (and anything left in them), links, folders, the registry file
        for sig, old in self._handlers.items():
            signal.signal(sig, old)

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

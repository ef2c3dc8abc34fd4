"""``agents-room serve --http`` on a simulated host: the team-deployment shape, one server per
host and repository (the server's folder is the repository its agents join), listening on the
host's 198.18 address, every request carrying the run's bearer token. Killed with its host
(``kill_host``) and started again with it."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .pidns import Host

FIRST_PORT = 8700


@dataclass
class HttpServer:
    host: Host
    argv: list[str]  # agents-room serve --http ADDR:PORT
    cwd: Path
    env: dict[str, str]
    log: Path
    port: int
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host.address}:{self.port}/mcp"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start it on its host (in the host's current PID namespace) and wait until it listens."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.host.command(self.argv, cwd=self.cwd), env=self.env, cwd=self.cwd,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection((self.host.address, self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"agents-room serve --http on {self.host.name} did not start listening "
                                       f"(see {self.log})") from None
                time.sleep(0.1)

    def reap(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()


def server_for(host: Host, repo_index: int, command: str, cwd: Path, env: dict[str, str], log: Path) -> HttpServer:
    port = FIRST_PORT + repo_index
    return HttpServer(host, [command, "serve", "--http", f"{host.address}:{port}"], cwd, env, log, port)

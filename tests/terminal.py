"""A real terminal for an interactive harness session: tmux on a private socket, so each test
has its own server and ``close`` ends it whole.

    term = Terminal.start("alice", argv, cwd=project, env=env)
    term.wait_screen("❯", what="the prompt")    # polls the screen with a deadline
    term.type("join the room")                  # the text, then Enter once the screen shows it
    term.close()                                # tmux, the CLI and every descendant, ended

The CLI runs under ``env -i`` with exactly ``env``: the tmux server's own environment (ours)
never reaches it; with ``multiplexed`` the CLI also gets tmux's ``TMUX`` and ``TMUX_PANE``, as a
CLI started from a shell in a pane does (the terminal wake lever finds its pane by them). The pane stays after the CLI exits (``remain-on-exit``), so a session that
died still shows why.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from harnesscli import REQUIRE_ENV

from sim.harness.process import descendants

WIDTH, HEIGHT = 200, 50


class Terminal:
    def __init__(self, name: str, socket: str, config: Path) -> None:
        self.name, self.socket, self._config = name, socket, config
        self.pid = int(self._tmux("display-message", "-p", "#{pane_pid}").strip())
        # tmux leaves its socket file behind when its server ends
        self._socket_path = Path(self._tmux("display-message", "-p", "#{socket_path}").strip())
        self._seen: dict[int, str] = {}  # pid -> its start time: a pid is reused, the pair is not

    @classmethod
    def start(cls, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], multiplexed: bool = False
              ) -> Terminal:
        if not shutil.which("tmux"):  # where .ci/run installed the CLIs, a missing tmux fails
            missing = "tmux is not installed (apt-get install tmux)"
            if os.environ.get(REQUIRE_ENV) == "1" or os.environ.get("CI") == "true":
                pytest.fail(f"{name}: {missing}; .ci/run installs it")
            pytest.skip(missing)
        socket = f"agents-room-{name}-{os.getpid()}-{time.monotonic_ns()}"
        fd, conf = tempfile.mkstemp(prefix="tmux-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write("set -g remain-on-exit on\nset -g history-limit 5000\nset -g status off\n")
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        if multiplexed:  # tmux's own TMUX and TMUX_PANE kept, as a shell in a pane has them
            command = ["sh", "-c", 'exec env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" "$@"', "sh", *command[2:]]
        subprocess.run(["tmux", "-L", socket, "-f", conf, "new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT),
                        "-c", str(cwd), *command], check=True, timeout=30, capture_output=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color"})
        return cls(name, socket, Path(conf))

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        """What the terminal shows now (blank lines dropped)."""
        return "\n".join(line for line in self._tmux("capture-pane", "-p").splitlines() if line.strip())

    def alive(self) -> bool:
        return self._tmux("display-message", "-p", "#{pane_dead}").strip() != "1"

    def wait_screen(self, want: str | Callable[[str], bool], *, what: str, timeout: float = 60.0) -> str:
        """The screen once it shows ``want`` (a text, or a test of the screen); AssertionError
        naming the session, what it waited for and the last screen, at ``timeout`` or when the
        CLI exited first."""
        test = want if callable(want) else (lambda s: want in s)
        deadline = time.monotonic() + timeout
        while True:
            self._remember()
            shown = self.screen()
            if test(shown):
                return shown
            if not self.alive():
                raise AssertionError(f"{self.name}: the session exited while waiting for {what}; its screen:\n{shown}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"{self.name}: no {what} within {timeout:g} s; its screen:\n{shown}")
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def type(self, text: str, *, submitted: Callable[[], bool] | None = None, timeout: float = 30.0) -> None:
        """Type ``text``, then press Enter once the screen shows it: a TUI that sees the Enter in
        the same burst takes it for part of a paste (Codex), and would not submit. Where the
        Enter may still land in a paste window on a loaded machine (Gemini CLI's), ``submitted``
        tells whether the line went: if not within a third of ``timeout``, Enter once more."""
        self._tmux("send-keys", "-l", "--", text)
        self.wait_screen(text, what=f"the typed line {text!r}", timeout=timeout)
        self.keys("Enter")
        if submitted is None:
            return
        deadline = time.monotonic() + timeout / 3
        while not submitted():
            if time.monotonic() >= deadline:
                self.keys("Enter")
                return
            time.sleep(0.1)

    def _remember(self) -> None:
        # Every process the session ever ran: a hook that Claude Code starts in the background
        # (the asyncRewake waiter) outlives its parent unless it is ended by pid.
        for pid in [self.pid, *descendants(self.pid)]:
            started = _started(pid)
            if started is not None:
                self._seen.setdefault(pid, started)

    def close(self) -> list[int]:
        """End the session: TERM, then KILL, to the CLI and every process it started that is
        still there (by pid and start time); then the tmux server. Returns the pids still
        running after all that: none, unless a process escaped."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            self._remember()
            for pid in self._ours():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and self._ours():
                time.sleep(0.05)
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
        self._config.unlink(missing_ok=True)
        self._socket_path.unlink(missing_ok=True)
        return self._ours()

    def _ours(self) -> list[int]:
        """The processes this session started that are still running."""
        return [pid for pid, started in self._seen.items() if _started(pid) == started]


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]

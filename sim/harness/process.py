"""A harness CLI's run as an OS process: its own session and process group, its output in
files, ended whole (the group and every descendant, even one that made a group of its own)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path


def _stat(pid: int | str) -> list[str] | None:
    """State and parent pid onward of /proc/PID/stat; None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    """A running process: a zombie (killed, its parent gone, not yet reaped) counts as ended."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)) and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Turn:
    """One CLI process: ``exited()`` (a reason once it has ended, for a model wait's ``stop``),
    ``wait(timeout)``, ``stop()``; ``output()`` what it printed."""

    def __init__(self, name: str, argv: list[str], proc: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.name, self.argv, self.proc, self.out, self.err = name, argv, proc, out, err
        self.started = time.time()

    @classmethod
    def start(cls, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], logs: Path) -> Turn:
        """Start ``argv``; RuntimeError naming the agent if it cannot be started at all."""
        logs.mkdir(parents=True, exist_ok=True)
        stamp = f"{name}-{time.time_ns()}"
        out, err = logs / f"{stamp}.out", logs / f"{stamp}.err"
        try:
            with open(out, "wb") as o, open(err, "wb") as e:
                proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                        start_new_session=True)
        except OSError as error:
            raise RuntimeError(f"{name}: could not start {argv[0]}: {error}") from error
        return cls(name, argv, proc, out, err)

    def output(self) -> str:
        text = self.out.read_text(errors="replace") if self.out.exists() else ""
        err = self.err.read_text(errors="replace") if self.err.exists() else ""
        return text + ("\n[stderr]\n" + err if err.strip() else "")

    def exited(self) -> str | None:
        code = self.proc.poll()
        if code is None:
            return None
        return f"{Path(self.argv[0]).name} exited with {code}; it said: {self.output()[-1500:].strip()}"

    def wait(self, timeout: float) -> int:
        """The exit code; on timeout the process is stopped and TimeoutError names the agent."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(f"{self.name}: {Path(self.argv[0]).name} did not end its turn within {timeout:g} s; "
                               f"it said: {self.output()[-1500:].strip()}") from None

    def stop(self) -> None:
        """End the process, its group and every descendant: TERM, then KILL what is left."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = descendants(self.proc.pid)
            if self.proc.poll() is None:
                pids.append(self.proc.pid)
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            if sig == signal.SIGTERM:
                try:
                    self.proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
        self.proc.wait()


class Session:
    """An interactive CLI in a terminal of its own: a tmux server on its own socket, one pane.
    ``type(text)`` types a prompt and Enter; ``screen()`` is what the pane shows;
    ``wait_screen(text, timeout)`` waits until it shows ``text``; ``stop()`` ends it whole."""

    def __init__(self, name: str, socket: Path, pane_pid: int) -> None:
        self.name, self.socket, self.pane_pid = name, socket, pane_pid

    @classmethod
    def start(cls, name: str, argv: list[str], *, cwd: Path, env: dict[str, str], socket: Path,
              size: tuple[int, int] = (200, 50)) -> Session:
        """Start ``argv`` in a new tmux server at ``socket``; RuntimeError naming the agent if
        tmux cannot start it."""
        command = " ".join(shlex.quote(a) for a in argv)
        started = subprocess.run(
            ["tmux", "-S", str(socket), "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd),
             *[f"-e{k}={v}" for k, v in env.items()], f"exec {command}"],
            env={**env, "TERM": "xterm-256color"}, capture_output=True, text=True, timeout=30, start_new_session=True)
        if started.returncode != 0:
            raise RuntimeError(f"{name}: tmux could not start {argv[0]}: {started.stderr.strip()}")
        pid = subprocess.run(["tmux", "-S", str(socket), "display-message", "-p", "#{pane_pid}"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
        return cls(name, socket, int(pid))

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True, text=True,
                              timeout=30).stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def type(self, text: str, timeout: float = 30) -> None:
        """Type ``text``, and Enter once the screen shows it: a TUI that gets both in one burst
        takes them as a paste, the Enter a new line in the prompt."""
        self._tmux("send-keys", "-l", text)
        self.wait_screen(text, timeout)
        self._tmux("send-keys", "Enter")

    def exited(self) -> str | None:
        return None if alive(self.pane_pid) else f"{self.name}: the session's CLI has exited"

    def wait_screen(self, text: str, timeout: float) -> str:
        """The screen once it shows ``text``; TimeoutError naming the agent, with the screen."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if text in shown:
                return shown
            if time.monotonic() > deadline or self.exited():
                raise TimeoutError(f"{self.name}: the session never showed {text!r} within {timeout:g} s; "
                                   f"it shows:\n{shown}")
            time.sleep(0.2)  # the poll's pace, not a wait for the event

    def stop(self) -> None:
        """End the CLI and everything it started, then the tmux server."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in [*descendants(self.pane_pid), self.pane_pid]:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 3
            while sig == signal.SIGTERM and alive(self.pane_pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self._tmux("kill-server")

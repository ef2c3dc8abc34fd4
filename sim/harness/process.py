"""A harness CLI's run as an OS process: its own session and process group, its output in
files, ended whole (the group and every descendant, even one that made a group of its own)."""

from __future__ import annotations

import os
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

"""What a server process learns about the agent it serves from its own environment.

These are the defaults ``room_join`` fills in for arguments the agent did not pass. A
stdio server is spawned by the agent's harness, so its environment *is* the agent's: the
harness sets the project folder, its session key and markers of which harness it is, and
the harness is the server's parent process. A Streamable HTTP server is shared by many
agents and started by someone else, so its environment tells nothing about any one agent.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from .programs import INTERPRETERS, PROGRAMS, program_names  # noqa: F401 (the names this module gave)


@dataclass(frozen=True)
class Identity:
    """Defaults for ``room_join``: where the agent works, which process is its harness,
    which harness it is, and the harness's key for this chat (a UUID), if any."""

    cwd: str
    pid: int | None
    harness: str
    harness_key: str | None


def detect_harness(env: Mapping[str, str], parent: int | None = None) -> str:
    """Which harness spawned us: from the markers each sets in its children's environment
    (Claude Code ``CLAUDECODE=1``, Gemini CLI ``GEMINI_CLI=1``, Cursor ``CURSOR_*``; ``CODEX_*``
    where a wrapper passes it), else from the program of ``parent`` (Codex passes its servers
    no variable of its own, but it is their parent)."""
    if env.get("CLAUDECODE") == "1":
        return "claude-code"
    if env.get("GEMINI_CLI") == "1":
        return "gemini"
    if any(name.startswith("CODEX_") for name in env):
        return "codex"
    if any(name.startswith("CURSOR_") for name in env):
        return "cursor"
    if parent is not None:
        for name in program_names(parent):
            if name in PROGRAMS:
                return PROGRAMS[name]
    return "unknown"


def default_harness_key(env: Mapping[str, str]) -> str | None:
    """``$AGENTS_ROOM_HARNESS_KEY``, else ``$CLAUDE_CODE_SESSION_ID`` (Claude Code sets it for
    the MCP servers it spawns). A value that is not a UUID is ignored with a note on stderr:
    the agent did not pass it, so an ``invalid_argument: harness_key`` would only puzzle it."""
    for name in ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID"):
        value = env.get(name, "").strip()
        if not value:
            continue
        try:
            return str(uuid.UUID(value))
        except ValueError:
            print(f"agents-room: ignoring ${name}: {value[:60]!r} is not a UUID", file=sys.stderr)
    return None


def project_dir(env: Mapping[str, str]) -> str:
    """``$CLAUDE_PROJECT_DIR`` (the folder Claude Code was started in; its MCP servers may run
    elsewhere), else this process's working directory."""
    return env.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def for_stdio(env: Mapping[str, str] | None = None) -> Identity:
    """A stdio server serves exactly one agent: the harness that spawned it (our parent), or
    the terminal client that started it (:func:`conversation_holder`)."""
    env = os.environ if env is None else env
    parent = os.getppid()
    harness = detect_harness(env, parent)
    return Identity(project_dir(env), conversation_holder(parent), harness, default_harness_key(env))


def conversation_holder(parent: int, proc: str = "/proc") -> int:
    """The process whose life is the conversation's. Usually our parent. Interactive Codex
    (0.171) runs its threads, and so their MCP servers, in a managed ``codex app-server``
    daemon that its TUI starts and that outlives it: a session recorded with the daemon's pid
    stayed alive after its person quit Codex. When our parent is that daemon, its parent is
    a Codex TUI, and that TUI is the only one running with the daemon's ``HOME`` (a second
    TUI of that ``HOME`` attaches to the same daemon, and nothing tells which TUI a thread's
    server serves), that TUI holds the conversation and its pid is recorded. Otherwise the
    daemon's is, as before."""
    if not is_codex_daemon(parent, proc):
        return parent
    grand = _parent_of(parent, proc)
    if grand is None or grand <= 1 or not _is_codex_tui(grand, proc):
        return parent
    home = _env_value(parent, b"HOME", proc)
    tuis = [int(e) for e in _listdir(proc) if e.isdigit() and int(e) != grand and _is_codex_tui(int(e), proc)
            and _env_value(int(e), b"HOME", proc) == home]
    return parent if tuis else grand


def is_codex_daemon(pid: int, proc: str = "/proc") -> bool:
    """Is ``pid`` a ``codex app-server`` (the daemon interactive Codex runs its threads in)?"""
    return "codex" in program_names(pid, proc) and b"app-server" in _argv(pid, proc)


def _is_codex_tui(pid: int, proc: str) -> bool:
    """Codex's own binary (not the npm wrapper's node) running something other than app-server."""
    try:
        exe = os.path.basename(os.readlink(f"{proc}/{pid}/exe"))
    except OSError:
        return False
    return exe == "codex" and b"app-server" not in _argv(pid, proc)


def _parent_of(pid: int, proc: str) -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _env_value(pid: int, name: bytes, proc: str) -> bytes | None:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return None
    return next((item[len(name) + 1:] for item in items if item.startswith(name + b"=")), None)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _argv(pid: int, proc: str) -> list[bytes]:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            return f.read(4096).split(b"\0")
    except OSError:
        return []


def for_http(env: Mapping[str, str] | None = None) -> Identity:
    """A shared HTTP server knows nothing of each agent: sessions get the server's folder as
    their cwd (so relative paths resolve against it; agents elsewhere pass absolute paths and
    join a shared room), no pid (their liveness is ``unknown``), and no harness or harness
    key unless the agent passes them."""
    env = os.environ if env is None else env
    return Identity(project_dir(env), None, "unknown", None)


# What an HTTP client may say of its agent's process (a stdio server learns it from its parent):
# the pid of the agent's process, and the host it runs on (``$AGENTS_ROOM_HOST_ID`` or the
# machine id; default the server's). With them the session's liveness is judged on that host
# like a stdio session's, so ``agents-room prune`` run there removes it once the process is gone.
PID_HEADER = "x-agents-room-pid"
HOST_HEADER = "x-agents-room-host"
_PID_MAX = 1 << 22  # the kernel's largest pid_max


def agent_process(headers: Mapping[str, str] | None) -> tuple[int | None, str | None]:
    """The (pid, host) an HTTP request's headers state, each None when not sent. Raises
    ``InvalidArgument`` naming the header for a malformed value."""
    from ..store import InvalidArgument
    from ..store.hosts import checked_host

    if not headers:
        return None, None
    pid_text, host = headers.get(PID_HEADER), headers.get(HOST_HEADER)
    pid = None
    if pid_text is not None:
        if not (pid_text.isascii() and pid_text.isdigit() and 0 < int(pid_text) <= _PID_MAX):
            raise InvalidArgument("X-Agents-Room-Pid", f"must be a process id (1..{_PID_MAX}), got {pid_text[:40]!r}")
        pid = int(pid_text)
    return pid, None if host is None else checked_host(host, "X-Agents-Room-Host")

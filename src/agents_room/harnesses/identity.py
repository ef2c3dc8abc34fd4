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
    """A stdio server serves exactly one agent: the harness that spawned it (our parent)."""
    env = os.environ if env is None else env
    parent = os.getppid()
    return Identity(project_dir(env), parent, detect_harness(env, parent), default_harness_key(env))


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

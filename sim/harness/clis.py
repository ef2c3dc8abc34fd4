"""The real harness CLIs pointed at a scripted model: where they are, how each is set up in a
scratch HOME and project, and the command lines for one headless turn or an interactive session.

    binary = locate("codex")                 # Located(path, problem): problem says what is missing
    launch = prepare("codex", binary.path, home, project, store, agent.url)
    turn = launch.start_turn("join the room")  # a Turn: its own process group, output in files
    turn.wait(timeout=60)                    # or turn.stop(); turn.exited() for a wait's ``stop``
    session = launch.start_session()         # interactive, in tmux: type(), screen(), wait_screen(), stop()

``prepare`` runs ``agents-room install <harness>`` (the store through ``AGENTS_ROOM_DB``) and
writes the CLI's model settings: Claude Code by environment (base URL, key, the small model
pinned, nonessential traffic off) and ``~/.claude.json`` (onboarding done, key approved,
project trusted, for interactive sessions); Codex a ``model_providers`` table with
``wire_api = "responses"`` and the project trusted; Gemini CLI by environment plus its user
settings (API-key auth) and the trusted folder. HOMEs belong under /var/tmp: Codex refuses to
make its helper binaries under /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .anthropic import SIDE_MODEL
from .process import Session, Turn

Harness = Literal["claude-code", "codex", "gemini"]
CACHE_ENV = "AGENTS_ROOM_NPM_CACHE"
DEFAULT_CACHE = "/var/cache/agents-room-npm"
# harness -> (npm package, folder in the cache, binary under node_modules/.bin)
CLIS: dict[Harness, tuple[str, str, str]] = {
    "claude-code": ("@anthropic-ai/claude-code", "_anthropic-ai_claude-code", "claude"),
    "codex": ("@openai/codex", "_openai_codex", "codex"),
    "gemini": ("@google/gemini-cli", "_google_gemini-cli", "gemini"),
}
GEMINI_MODEL = "gemini-2.5-pro"  # pinned: unpinned, a routing classifier asks first
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5-codex"
# What each interactive CLI shows once it takes input
READY: dict[Harness, str] = {"claude-code": "? for shortcuts", "codex": "? for shortcuts", "gemini": "Type your message"}
API_KEY = "sk-scripted-model-0123456789abcdef"  # any key: the scripted model reads none


@dataclass(frozen=True)
class Located:
    path: str
    problem: str | None  # None when the CLI (and node) is there


def cache() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def locate(harness: Harness) -> Located:
    """The CLI's executable in ``$AGENTS_ROOM_NPM_CACHE``, or what is missing and the install
    command."""
    package, folder, exe = CLIS[harness]
    path = cache() / folder / "node_modules" / ".bin" / exe
    if not shutil.which("node"):
        return Located(str(path), "node is not installed")
    if not os.access(path, os.X_OK):
        return Located(str(path), f"{path} is missing (npm install --prefix {cache() / folder} {package})")
    return Located(str(path), None)


def agents_room_command() -> str:
    """The agents-room executable of this installation (beside its interpreter)."""
    return str(Path(sys.executable).parent / "agents-room")


@dataclass
class Launch:
    """One harness set up in its HOME and project: what to run, where, with what environment."""

    harness: Harness
    binary: str
    home: Path
    project: Path
    env: dict[str, str]
    name: str = field(default="")  # the agent, for error messages

    def turn_argv(self, prompt: str) -> list[str]:
        """One headless turn: the prompt, every room tool and the shell allowed."""
        if self.harness == "claude-code":
            return [self.binary, "-p", prompt, "--model", CLAUDE_MODEL, "--output-format", "json",
                    "--allowedTools", "mcp__room", "Bash", "Edit", "Write", "Read"]
        if self.harness == "codex":
            return [self.binary, "exec", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
                    "--color", "never", prompt]
        return [self.binary, "-m", GEMINI_MODEL, "-p", prompt, "--yolo"]

    def session_argv(self) -> list[str]:
        """An interactive session (run it in a terminal: tmux)."""
        if self.harness == "claude-code":
            return [self.binary, "--model", CLAUDE_MODEL, "--allowedTools", "mcp__room", "Bash"]
        if self.harness == "codex":
            return [self.binary, "--dangerously-bypass-approvals-and-sandbox"]
        return [self.binary, "-m", GEMINI_MODEL, "--yolo"]

    def start_session(self, socket: Path | None = None, timeout: float = 120) -> Session:
        """The interactive session in tmux (socket default: in HOME), once it shows its prompt
        (keys typed before are lost, or echoed by the terminal and then wiped)."""
        session = Session.start(self.name or self.harness, self.session_argv(), cwd=self.project, env=self.env,
                                socket=socket or self.home / "tmux.sock")
        try:
            session.wait_screen(READY[self.harness], timeout)
        except BaseException:
            session.stop()
            raise
        return session

    def start_turn(self, prompt: str, *, extra_env: dict[str, str] | None = None) -> Turn:
        return Turn.start(self.name or self.harness, self.turn_argv(prompt), cwd=self.project,
                          env={**self.env, **(extra_env or {})}, logs=self.home)


def base_env(home: Path, agents_room: str) -> dict[str, str]:
    """A plain environment: no developer's keys or harness markers; node and agents-room on PATH."""
    path = os.pathsep.join([str(Path(agents_room).parent), os.environ.get("PATH", "/usr/bin:/bin")])
    keep = {k: os.environ[k] for k in ("LANG", "TERM") if k in os.environ}
    return {**keep, "PATH": path, "HOME": str(home), "NO_COLOR": "1", "CI": "1"}


def prepare(harness: Harness, binary: str, home: Path, project: Path, store: str, model_url: str, *,
            name: str = "", agents_room: str | None = None, channel: bool = False,
            scope: Literal["project", "user"] | None = None, install: bool = True,
            edits: Literal["claim", "check", "off"] = "claim") -> Launch:
    """Install agents-room for ``harness`` in ``project`` (store ``store``) and point the CLI
    at ``model_url``; RuntimeError with the installer's words if it fails. ``scope``: where
    the install writes; by default the project's files when the store is under ``home``, else
    the user's (a project's committed files may not name a machine's store; agents that share
    a store outside their HOMEs, and maybe a project folder, each keep their own settings).
    ``install=False``: the CLI pointed at the model only, without agents-room (what a turn
    costs without it). ``edits``: install's edit guard (``off``: none, the control)."""
    if harness not in CLIS:
        raise ValueError(f"harness must be one of {sorted(CLIS)}, got {harness!r}")
    if scope is None:  # Codex reads its servers from the user's config only
        scope = "project" if harness != "codex" and Path(store).is_relative_to(home) else "user"
    agents_room = agents_room or agents_room_command()
    env = {**base_env(home, agents_room), "AGENTS_ROOM_DB": store}
    command = [agents_room, "install", harness, "--dir", str(project), "--scope", scope, "--edits", edits,
               *(["--channel"] if channel else [])]
    if harness == "codex":
        _codex_settings(home, project, model_url)  # first: its top-level keys must precede the tables
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=project, env=env) if install else None
    if done is not None and done.returncode != 0:
        raise RuntimeError(f"{name or harness}: {' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    if harness == "codex" and install:
        _codex_require_room(home)
    elif harness == "claude-code":
        env |= _claude_settings(home, project, model_url)
    elif harness == "gemini":
        env |= _gemini_settings(home, project, model_url)
    return Launch(harness, binary, home, project, env, name)


def _claude_settings(home: Path, project: Path, url: str) -> dict[str, str]:
    state = home / ".claude.json"
    known = json.loads(state.read_text()) if state.exists() else {}
    known.update(hasCompletedOnboarding=True, customApiKeyResponses={"approved": [API_KEY[-20:]], "rejected": []})
    known.setdefault("projects", {}).setdefault(str(project), {})["hasTrustDialogAccepted"] = True
    state.write_text(json.dumps(known, indent=2))
    return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": API_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ANTHROPIC_SMALL_FAST_MODEL": SIDE_MODEL, "ANTHROPIC_DEFAULT_HAIKU_MODEL": SIDE_MODEL,
            "DISABLE_AUTOUPDATER": "1",
            # without it a -p turn may start before the room server is connected (its tools missing)
            "MCP_CONNECTION_NONBLOCKING": "false"}


def _codex_settings(home: Path, project: Path, url: str) -> None:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    before = config.read_text() if config.exists() else ""
    config.write_text(f'model = "{CODEX_MODEL}"\nmodel_provider = "scripted"\n\n'
                      f'[model_providers.scripted]\nname = "scripted model"\nbase_url = "{url}/v1"\n'
                      f'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
                      f'[projects."{project}"]\ntrust_level = "trusted"\n\n{before}')


def _codex_require_room(home: Path) -> None:
    # Codex starts MCP servers beside the first model request and offers only the ready ones;
    # a required server is waited for, so the first request offers the room's tools.
    config = home / ".codex" / "config.toml"
    text = config.read_text()
    if "[mcp_servers.room]\n" not in text:
        raise RuntimeError(f"{config} holds no [mcp_servers.room] table after install")
    config.write_text(text.replace("[mcp_servers.room]\n", "[mcp_servers.room]\nrequired = true\n", 1))


def _gemini_settings(home: Path, project: Path, url: str) -> dict[str, str]:
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    settings = folder / "settings.json"
    known = json.loads(settings.read_text()) if settings.exists() else {}  # a user-scope install's
    known.setdefault("security", {})["auth"] = {"selectedType": "gemini-api-key"}
    known.setdefault("general", {}).update(disableAutoUpdate=True, disableUpdateNag=True)
    known.setdefault("privacy", {})["usageStatisticsEnabled"] = False
    settings.write_text(json.dumps(known, indent=2))
    (folder / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    return {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": API_KEY}

"""Codex's hooks: what ``agents-room install codex`` writes into ``~/.codex/hooks.json``, and
the trust Codex asks of a hook before it runs it.

Codex (0.171) reads ``hooks.json`` in its home folder in Claude Code's form (per event, groups
of ``{"matcher", "hooks": [{"type": "command", "command", "timeout"}]}``), runs each command
through ``$SHELL -lc`` with the same JSON on stdin (``session_id``, ``hook_event_name``,
``stop_hook_active``) and takes the same answers: ``hookSpecificOutput.additionalContext`` at
SessionStart, UserPromptSubmit and PostToolUse, and ``{"decision": "block", "reason"}`` at
Stop, whose reason it gives the model as a prompt to go on with. So the hook is the one Claude
Code runs (:mod:`.hook`). It finds its session by the Codex process among its ancestors: the
MCP server recorded that pid at ``room_join`` (Codex tells a server nothing else, and a hook's
``session_id``, Codex's thread id, is no key a server knows).

Codex runs a hook of the user's own only once it is trusted: ``trusted_hash`` under
``[hooks.state."<key>"]`` in ``config.toml``, the key being ``<hooks.json>:<event>:<group
index>:<hook index>`` and the hash Codex's fingerprint of the hook (:func:`fingerprint`).
Install trusts the hooks it writes: the person who ran it chose them, as Claude Code's install
approves its server. A hook edited by hand no longer matches its hash, and Codex asks again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .config_change import HOOK_TIMEOUT_S, USER, Change, InstallError, Store, marked
from .hook_line import local
from .json_files import event_hooks_edit, json_change
from .toml_lines import Document, toml_key

# Our events and Codex's own names for them (in a hook's key and fingerprint).
EVENTS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
          "PostToolUse": "post_tool_use", "Stop": "stop"}
# The events whose matcher Codex keeps; for the others it is ignored, and left out of the hash.
MATCHED = frozenset({"SessionStart", "PreToolUse", "PostToolUse"})
# Every event a hook of ours runs on, by Codex's label: the news hooks' and the edit guard's
# (agents_room/harnesses/editguard_install.py).
LABELS = {**EVENTS, "PreToolUse": "pre_tool_use"}
# The event of every tool call, whose hook exits at once when there is no news (:mod:`.hook_line`),
# when Codex's shell reads it. A prompt's hook always runs: it marks the turn's start, which the
# terminal wake lever reads before it types into an idle pane (harnesses/turns.py).
QUIET_EVENTS = frozenset({"PostToolUse"})
POSIX_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
DEFAULT_TIMEOUT_S = 600  # Codex's, for a hook that names none
STATE = "hooks.state"


def hooks_change(path: Path, hook: str, store: Store | None) -> Change:
    """Our hook on each of :data:`EVENTS` in ``hooks.json``, merged as Claude Code's settings
    are (:func:`.json_files.event_hooks_edit`). A store named at install rides the command
    (exported first), as the server's ``env`` does: Codex gives its hooks its own environment."""
    value = store.value if store else None

    def ours(event: str) -> list[dict[str, Any]]:
        command = local(hook, store=value, quiet=event in QUIET_EVENTS and posix_shell())
        return [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]

    return json_change(path, event_hooks_edit(path, {event: ours(event) for event in EVENTS}), USER)


def posix_shell(env: dict[str, str] | None = None) -> bool:
    """Does Codex's ``$SHELL`` (which runs its hooks) read the quiet test's ``sh`` line? Any
    other shell (fish, ...) gets the plain command."""
    shell = os.path.basename((os.environ if env is None else env).get("SHELL") or "/bin/sh")
    return shell in POSIX_SHELLS


def trusted(path: Path, text: str) -> dict[str, str]:
    """Key -> fingerprint of each of our hooks in ``text``, the hooks.json at ``path``."""
    hooks = json.loads(text).get("hooks", {})
    out = {}
    for event, label in EVENTS.items():
        for g, group in enumerate(hooks.get(event) or []):
            if not isinstance(group, dict):
                continue
            for h, handler in enumerate(group.get("hooks") or []):
                if marked(handler):
                    out[f"{path}:{label}:{g}:{h}"] = fingerprint(event, group.get("matcher"), handler)
    return out


def fingerprint(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    """Codex's hash of one command hook (its ``version_for_toml`` of the hook's normalized
    identity): the event's label, the matcher where the event has one, and the hook with its
    timeout (at least 1 s) and ``async``, as compact JSON with sorted keys, SHA-256. Checked
    against the hash the real Codex reports (``hooks/list``) in tests/test_harness_codex.py."""
    import hashlib

    hook: dict[str, Any] = {"type": "command", "command": handler["command"],
                            "timeout": max(int(handler.get("timeout") or DEFAULT_TIMEOUT_S), 1),
                            "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        hook["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": LABELS[event], "hooks": [hook]}
    if event in MATCHED and matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def trust(doc: Document, path: Path, current: dict[str, Any], wanted: dict[str, str]) -> list[str]:
    """Set ``trusted_hash`` for each key of ``wanted`` in ``doc`` (config.toml at ``path``,
    ``current`` as it reads now); the user's ``enabled`` stays. A state written in a form
    install does not edit is refused."""
    hooks = current.get("hooks", {})
    states = hooks.get("state", {}) if isinstance(hooks, dict) else None
    if not isinstance(states, dict) or (wanted and doc.defines_inline("hooks")):
        raise InstallError(f"{path}: hooks is written in a form install does not edit (hooks.state must be "
                           "tables); it was left as it is")
    changed = 0
    for key, digest in wanted.items():
        old = states.get(key)
        if isinstance(old, dict) and old.get("trusted_hash") == digest:
            continue
        table = toml_key(STATE) + "." + json.dumps(key)
        if doc.has_table(table):
            doc.set_key(table, "trusted_hash", digest)
        elif old is None:
            doc.append_table(table, {"trusted_hash": digest}, {})
        else:
            raise InstallError(f"{path}: the state of the hook {key} is not written as a [{STATE}.\"...\"] table; "
                               "it was left as it is")
        changed += 1
    return [f"{changed} hook{'s' if changed != 1 else ''} trusted"] if changed else []


def placed(text: str, wanted: dict[str, str]) -> bool:
    """Does config.toml's ``text`` trust each hook of ``wanted`` with its hash?"""
    import tomllib

    states = tomllib.loads(text).get("hooks", {}).get("state", {})
    return all(isinstance(states.get(k), dict) and states[k].get("trusted_hash") == v for k, v in wanted.items())

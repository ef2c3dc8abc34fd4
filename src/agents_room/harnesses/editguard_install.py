"""What ``agents-room install <harness> --edits claim|check|off`` adds beside the news hooks:
the edit guard (:mod:`.editguard`) on the harness's file-writing tools, and the read-baseline
hook on its read tools. Their groups carry their own ``matcher`` (the tools), so they sit in
the same settings file as the news hooks, in groups of their own, which the news hooks' merge
(:func:`.json_files.event_hooks_edit`) leaves alone and this one replaces.

- Claude Code: ``PreToolUse`` matcher ``Edit|Write|MultiEdit|NotebookEdit`` (denial:
  ``permissionDecision: "deny"`` with the reason), ``PostToolUse`` matcher ``Read``.
- Codex: ``PreToolUse`` matcher ``apply_patch`` (its only file writer; a patch run through the
  shell is a shell write), trusted in config.toml as the news hooks are. Codex has no read
  tool of its own (it reads through its shell): no baselines.
- Gemini CLI: ``BeforeTool`` matcher ``write_file|replace`` (denial: ``decision: "deny"``),
  ``AfterTool`` matcher ``read_file|read_many_files``.
- Cursor: no hook runs before its edits (``afterFileEdit`` runs after the file is written), so
  no guard is installed; the commit guard is its backstop.

``--edits off`` removes the guard's groups; ``check`` installs a guard that denies but never
claims.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .config_change import HOOK_TIMEOUT_S, Change, Store
from .editguard import command, matcher

# A hook's command is the guard's: the installed entry, or the command by name.
MARKS = ("editguard_entry.py", "agents-room edit-guard")
# harness -> (event before its writers, event after its readers or None)
EVENTS: dict[str, tuple[str, str | None]] = {
    "claude-code": ("PreToolUse", "PostToolUse"),
    "codex": ("PreToolUse", None),
    "gemini": ("BeforeTool", "AfterTool"),
}
GEMINI_TIMEOUT_MS = HOOK_TIMEOUT_S * 1000


def guard_marked(hook: Any) -> bool:
    return isinstance(hook, dict) and any(m in str(hook.get("command", "")) for m in MARKS)


def wanted(harness: str, edits: str, *, by_name: bool, store: Store | None) -> dict[str, list[dict[str, Any]]]:
    """Per event, the guard's groups (none for ``off``: ours are removed)."""
    before, after = EVENTS[harness]
    out: dict[str, list[dict[str, Any]]] = {before: []} | ({after: []} if after else {})
    if edits == "off":
        return out
    prefix = f"AGENTS_ROOM_DB={shlex.quote(store.value)} " if store and harness != "claude-code" else ""

    def hook(cmd: str) -> dict[str, Any]:
        if harness == "gemini":
            return {"type": "command", "name": "agents-room-edit-guard", "command": prefix + cmd,
                    "timeout": GEMINI_TIMEOUT_MS}
        return {"type": "command", "command": prefix + cmd, "timeout": HOOK_TIMEOUT_S}

    out[before] = [{"matcher": matcher(harness), "hooks": [hook(command(harness, edits, by_name=by_name))]}]
    if after:
        out[after] = [{"matcher": matcher(harness, read=True),
                       "hooks": [hook(command(harness, edits, read=True, by_name=by_name))]}]
    return out


def hooks_edit(groups: dict[str, list[dict[str, Any]]]) -> Any:
    """Our guard groups per event, replacing any guard hook there before; every other hook
    stays where it is."""

    def edit(data: dict[str, Any]) -> list[str]:
        hooks = data.setdefault("hooks", {}) if any(groups.values()) else data.get("hooks")
        if not isinstance(hooks, dict):
            return []
        notes = []
        for event, ours in groups.items():
            existing = hooks.get(event) or []
            if not isinstance(existing, list):
                continue
            kept = []
            for g in existing:
                if isinstance(g, dict) and any(guard_marked(h) for h in g.get("hooks", [])):
                    rest = [h for h in g.get("hooks", []) if not guard_marked(h)]
                    if rest:
                        kept.append({**g, "hooks": rest})
                else:
                    kept.append(g)
            new = kept + ours
            if new == existing:
                continue
            if new:
                hooks[event] = new
            else:
                hooks.pop(event, None)
            notes.append(f"edit guard {event} hook " + ("set" if ours else "removed"))
        if not hooks:
            data.pop("hooks", None)
        return notes

    return edit


def hooks_file(harness: str, scope: str, root: Path, home: Path) -> Path | None:
    """The settings file holding the harness's hooks (as its install module writes them)."""
    if harness == "claude-code":
        return root / ".claude" / "settings.local.json" if scope == "project" else home / ".claude" / "settings.json"
    if harness == "codex":
        return home / ".codex" / "hooks.json"
    if harness == "gemini":
        return (root if scope == "project" else home) / ".gemini" / "settings.json"
    return None


def extend(changes: list[Change], harness: str, scope: str, root: Path, home: Path, edits: str,
           store: Store | None) -> list[Change]:
    """``changes`` (install's plan) with the edit guard's hooks set in the harness's hooks file
    (and, for Codex, trusted in config.toml). A harness without a before-edit hook: unchanged."""
    path = hooks_file(harness, scope, root, home)
    if path is None or harness not in EVENTS:
        return changes
    by_name = harness == "gemini" and scope == "project"  # committed: no machine's paths
    groups = wanted(harness, edits, by_name=by_name, store=store)
    out = []
    found = False
    for change in changes:
        if change.path == path:
            found = True
            change = _applied(change, hooks_edit(groups))
        out.append(change)
    if not found:
        from .json_files import json_change

        out.append(json_change(path, hooks_edit(groups), ""))
    if harness == "codex":
        out = _codex_trust(out, path, home / ".codex" / "config.toml")
    return [c for c in out if c.before is not None or c.changed]


def _applied(change: Change, edit: Any) -> Change:
    data = json.loads(change.after) if change.after and change.after.strip() else {}
    notes = edit(data)
    if not notes:
        return change
    return Change(change.path, change.before, json.dumps(data, indent=2) + "\n", (*change.notes, *notes),
                  change.audience)


def trusted(path: Path, text: str) -> dict[str, str]:
    """Codex's key -> fingerprint of each guard hook in ``text``, the hooks.json at ``path``
    (as :func:`.codex_hooks.trusted` gives them for the news hooks)."""
    from . import codex_hooks

    out = {}
    for g, group in enumerate(json.loads(text).get("hooks", {}).get("PreToolUse") or []):
        for h, handler in enumerate(group.get("hooks") or [] if isinstance(group, dict) else []):
            if guard_marked(handler):
                key = f"{path}:pre_tool_use:{g}:{h}"
                out[key] = codex_hooks.fingerprint("PreToolUse", group.get("matcher"), handler)
    return out


def _codex_trust(changes: list[Change], hooks_path: Path, config: Path) -> list[Change]:
    """Codex runs a user's hook only once trusted: the guard's hooks' hashes into config.toml,
    as install trusts its news hooks (:mod:`.codex_hooks`)."""
    import tomllib

    from . import codex_hooks
    from .toml_lines import Document

    hooks = next((c for c in changes if c.path == hooks_path), None)
    if hooks is None or not hooks.after:
        return changes
    trust = trusted(hooks_path, hooks.after)
    out = []
    for change in changes:
        if change.path == config and trust:
            text = change.after or ""
            doc = Document(text)
            notes = codex_hooks.trust(doc, config, tomllib.loads(text), trust)
            if notes:
                change = Change(change.path, change.before, doc.text(), (*change.notes, *notes), change.audience)
        out.append(change)
    return out

"""Which harness a process is, from what it runs: shared by the server's identity (its parent
is its harness, agents_room/harnesses/identity.py) and the edit guard (the harness among the
hook's ancestors, agents_room/harnesses/editguard.py), which runs on every edit and so imports
nothing but ``os``.
"""

from __future__ import annotations

import os

# Harness programs by the name they run under: the parent of a stdio server is its harness.
# Codex starts its servers from its native binary `codex`; Gemini CLI from node running its
# `gemini` script; Claude Code from its binary (`claude`, `claude.exe` as npm installs it).
PROGRAMS = {"codex": "codex", "gemini": "gemini", "claude": "claude-code", "claude.exe": "claude-code",
            "cursor": "cursor", "cursor-agent": "cursor"}
# Interpreters a harness may run as a script under: the script names the harness.
INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno"})


def program_names(pid: int, proc: str = "/proc") -> list[str]:
    """What process ``pid`` runs, as base names: its executable, its ``argv[0]``, and the
    script an interpreter (node) runs. Two small reads; empty when the process is gone or not
    ours to read."""
    names = []
    try:
        names.append(os.path.basename(os.readlink(f"{proc}/{pid}/exe")))
    except OSError:
        pass
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            argv = f.read(4096).split(b"\0")
    except OSError:
        return names
    args = [a.decode("utf-8", "replace") for a in argv if a]
    if args:
        names.append(os.path.basename(args[0]))
        if os.path.basename(args[0]) in INTERPRETERS or (names and names[0] in INTERPRETERS):
            script = next((a for a in args[1:] if not a.startswith("-")), None)
            if script:
                names.append(os.path.basename(script))
    return names

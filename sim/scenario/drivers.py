"""What each driver can run, checked when a scenario is read and again for a ``--driver``
override: wake levers and wake ops are the direct driver's, CLIs (``harnesses``) the harness
driver's, and that driver runs no faults, no simulated hosts and no guarded edits."""

from __future__ import annotations

from typing import Any

from .tables import ScenarioError

# The wake lever's entries: the direct driver runs agents_room.wake.deliver with a lever of the
# simulator's own (the MCP tools have no such call: a server's watcher does it).
WAKE_KEYS = ("wake", "wake_idle", "wake_turn")
# ``[workload] edits``: the edit guard (agents-room install's ``--edits``) a guarded_edit goes
# through; ``off`` installs none (the control).
EDITS = ("claim", "check", "off")


def check_wake(repos: Any, w: Any, run: Any) -> None:
    """Wake levers are the direct driver's: a stdio server records its lever from its
    environment, and its watcher, not a tool, signals."""
    if run.driver == "direct":
        return
    if levers := [r.name for r in repos if r.wake_lever]:
        raise ScenarioError(f"[repos] wake_lever: the {run.driver} driver cannot give an agent the simulator's lever "
                            f"(repos {levers}); use driver = \"direct\"")
    if wake := [k for k, v in w.mix if k in WAKE_KEYS and v > 0]:
        raise ScenarioError(f"[workload.mix] {wake[0]}: wake ops need driver = \"direct\", not {run.driver!r}")


def check_harness(repos: Any, run: Any, faults: Any, hosts: Any, w: Any) -> None:
    """``harnesses`` are the harness driver's; that driver runs real CLIs on this machine, with
    no fault of the nemesis's and no simulated hosts; and its CLIs run their own edit guard
    (a guarded_edit is the hook event another driver's agent sends as a harness would)."""
    if run.driver != "harness":
        if named := [r.name for r in repos if r.harnesses]:
            raise ScenarioError(f"[repos] harnesses: only the harness driver runs CLIs (repos {named}); "
                                f"use driver = \"harness\", not {run.driver!r}")
        return
    if faults.kinds():
        raise ScenarioError(f"[faults] {faults.kinds()[0]}: the harness driver runs no faults")
    if hosts is not None:
        raise ScenarioError("[hosts]: the harness driver runs its CLIs on this machine, not on simulated hosts")
    if w.weights().get("guarded_edit", 0) > 0:
        raise ScenarioError("[workload.mix] guarded_edit: a harness agent's CLI runs its own edit guard; "
                            "use driver = \"direct\" or \"mcp\"")

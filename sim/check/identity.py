"""File identity: one file reached by two spellings of its path (a symlink to a folder above
it, as ``~/work -> /mnt/data/work``) is one file, and two sessions holding it exclusive
through two spellings hold one file at once.

A run records each spelled folder and the real folder it names (``spellings.json``, written
by sim/run/layout.py). Before anything is judged, every path the checker compares, in the
store's events and in the clients' history, is put in its real spelling, so that lease
windows, exclusivity, directory coverage, selectors and reads are judged per file, whatever
spelling the store keyed them by. The folders come from the run's own file, not from the
file system: the checker judges a run's files wherever they are (the links may be gone).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# The history records whose ``value`` carries a path argument (invoke, fail, info) or answer (ok).
PATH_OPS = frozenset({"lease_claim", "lease_renew", "lease_release", "lease_check", "note_read", "drift_check", "edit",
                      "guarded_edit"})


class Spellings:
    """The spelled folders of a run, each with the real folder it names."""

    def __init__(self, folders: Mapping[str, str] | None = None) -> None:
        pairs = [(str(s).rstrip("/") or "/", str(r).rstrip("/") or "/") for s, r in (folders or {}).items()]
        for spelled, real in pairs:
            if not spelled.startswith("/") or not real.startswith("/"):
                raise ValueError(f"spellings: {spelled!r} -> {real!r}: both folders must be absolute paths")
        # the longest first: a spelled folder inside another is taken whole
        self.folders = sorted((p for p in pairs if p[0] != p[1]), key=lambda p: -len(p[0]))

    def __bool__(self) -> bool:
        return bool(self.folders)

    def path(self, path: Any) -> Any:
        """``path`` in its real spelling, by whole components (``/a/link/x`` under the folder
        ``/a/link``, never ``/a/linked/x``); a relative path, or one under no spelled folder,
        as given."""
        if not isinstance(path, str) or not path.startswith("/"):
            return path
        for spelled, real in self.folders:
            if path == spelled or path.startswith(spelled + "/"):
                return real + path[len(spelled):]
        return path

    def selector(self, to: Any) -> Any:
        """A ``file:`` selector whose glob is an absolute path, in its real spelling (the
        glob's characters beyond the folder are kept as they are)."""
        if isinstance(to, str) and to.startswith("file:/"):
            return "file:" + self.path(to[5:])
        return to

    def events(self, events: list[Any]) -> list[Any]:
        """The store's events with their paths, the joins' cwd and the sends' selectors respelled."""
        if not self:
            return events
        out = []
        for ev in events:
            payload = ev.payload
            if ev.kind == "join" and "cwd" in payload:
                payload = {**payload, "cwd": self.path(payload["cwd"])}
            elif ev.kind == "send" and "selector" in payload:
                payload = {**payload, "selector": self.selector(payload["selector"])}
            if ev.path is not None or payload is not ev.payload:
                ev = dataclasses.replace(ev, path=self.path(ev.path), payload=payload)
            out.append(ev)
        return out

    def records(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The clients' history with the paths they sent and were answered respelled: the
        ``path`` argument of the lease and read tools and of edits, ``file:`` targets (sent,
        and as a recv returns them), the paths of ``lease_list`` answers."""
        if not self:
            return records
        return [self._record(r) for r in records]

    def _record(self, r: dict[str, Any]) -> dict[str, Any]:
        value, f = r.get("value"), r.get("f")
        if not isinstance(value, dict):
            return r
        if f in PATH_OPS and "path" in value:
            value = {**value, "path": self.path(value["path"])}
        elif f == "msg_send" and "to" in value:
            value = {**value, "to": self.selector(value["to"])}
        elif f == "msg_recv" and isinstance(value.get("to"), list):  # each message's target, as its sender wrote it
            value = {**value, "to": [self.selector(to) for to in value["to"]]}
        elif f == "lease_list" and isinstance(value.get("leases"), list):
            value = {**value, "leases": [[self.path(x[0]), *x[1:]] if isinstance(x, list) and x else x
                                         for x in value["leases"]]}
        else:
            return r
        return {**r, "value": value}

"""Whom a server acts for: a session id is a name, not a key (contract §2).

Every listing shows session ids (``room_who``, ``agents-room who``, the dashboard, the guard's
refusals), so an id proves nothing about who passes it. Without this check a model that copied
another agent's id from a listing would read that agent's mail (marking it read), drop its
lease or end its session, and nobody would notice. A server therefore acts only for its own
agent:

- over stdio (one process per agent, spawned by its harness): the sessions it joined or
  rejoined, and those whose harness key is its agent's (``$AGENTS_ROOM_HARNESS_KEY`` or
  ``$CLAUDE_CODE_SESSION_ID``, harnesses/identity.py), so a server the harness restarted still
  serves the id the model holds;
- over Streamable HTTP (one process, many agents): the sessions whose credential the request
  presents. ``room_join`` hands it out as ``credential`` in its answer; a client presents it in
  the ``X-Agents-Room-Credential`` header (several, comma-separated, for a client of several
  sessions). The MCP connection that called ``room_join`` presents it without a header: its
  ``Mcp-Session-Id``, a secret of that connection, is bound to the session then, so a harness
  whose model cannot set headers keeps working until it reconnects (then it joins again: by
  harness key, the same session).

A credential is ``<session id>.<MAC>``: an HMAC of the id under a key this process draws at
start, so nothing is stored and a restarted server hands out new ones. An argument that is not
a well-formed id, or an id that names no session at all, goes on to the store, whose words say
what was probably meant (a prefix, a label, a harness key, another store). Another session's
id is refused with ``unknown_session:`` naming the session(s) this server serves.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from ..store import Store, UnknownSession
from ..store.bounds import SESSION_ID_RE

CREDENTIAL_HEADER = "x-agents-room-credential"
CONNECTION_HEADER = "mcp-session-id"  # the Streamable HTTP transport's id of one client connection
_MAC_HEX = 32  # 128 bits


class Selves:
    """The sessions one server process may act for (see the module's words)."""

    def __init__(self, harness_key: str | None) -> None:
        self.harness_key = harness_key.lower() if harness_key else None
        self.joined: set[str] = set()  # stdio: joined, rejoined, or found by the agent's harness key
        self.by_connection: dict[str, set[str]] = {}  # HTTP: Mcp-Session-Id -> the sessions it joined
        self._key = secrets.token_bytes(32)

    def credential(self, session_id: str) -> str:
        mac = hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()[:_MAC_HEX]
        return f"{session_id}.{mac}"

    def joined_as(self, session_id: str, headers: Mapping[str, str] | None) -> dict[str, Any]:
        """Record that this server's client joined (or rejoined) ``session_id``. Over HTTP
        (``headers`` given) the answer's extra field: the session's credential."""
        if headers is None:
            self.joined.add(session_id)
            return {}
        connection = headers.get(CONNECTION_HEADER)
        if connection:
            self.by_connection.setdefault(connection, set()).add(session_id)
        return {"credential": self.credential(session_id)}

    def check(self, store: Store, session_id: Any, headers: Mapping[str, str] | None) -> Any:
        """The ``session_id`` to act as: the id itself, or the id a genuine credential names.
        Raises ``UnknownSession`` when it names a session this server does not serve, or is a
        credential this process did not hand out. ``headers``: the HTTP request's, ``None``
        over stdio (or in process)."""
        if type(session_id) is str and session_id in self.joined:  # the common case over stdio: one lookup
            return session_id
        if not isinstance(session_id, str):
            return session_id  # the store refuses it, naming the field
        sid, dot, _ = session_id.strip().partition(".")  # stripped as the store reads it
        if dot and SESSION_ID_RE.fullmatch(sid):
            if self._genuine(session_id.strip()):
                return sid
            raise UnknownSession(
                f"{session_id.strip()[:80]!r} is not a credential this server handed out (it may have restarted "
                "since): room_join again (by your harness key: the same session) for a new one")
        if dot or not SESSION_ID_RE.fullmatch(sid):
            return session_id  # never an id: the store says what it probably is
        if headers is None:
            self._check_stdio(store, sid)
        else:
            self._check_http(store, sid, headers)
        return session_id

    def _check_stdio(self, store: Store, sid: str) -> None:
        if sid in self.joined:
            return
        found = store.sessions_by_id_or_key(sid, self.harness_key)
        target = next((s for s in found if s.id == sid), None)
        if target is None:
            return  # names no session: the store's words (left, another store)
        if self.harness_key and target.harness_key == self.harness_key:
            self.joined.add(sid)
            return
        by_key = [s.id for s in found if self.harness_key and s.harness_key == self.harness_key and s.left_at is None]
        mine = sorted(self.joined) + [i for i in by_key if i not in self.joined]
        raise UnknownSession(_refusal(sid, target.label, mine, mine[0] if mine else None))

    def _check_http(self, store: Store, sid: str, headers: Mapping[str, str]) -> None:
        presented = [c.strip() for c in headers.get(CREDENTIAL_HEADER, "").split(",") if c.strip()]
        expected = self.credential(sid)
        if any(hmac.compare_digest(c.encode(), expected.encode()) for c in presented):
            return
        connection = headers.get(CONNECTION_HEADER)
        bound = self.by_connection.get(connection, set()) if connection else set()
        if sid in bound:
            return
        target = next((s for s in store.sessions_by_id_or_key(sid, None) if s.id == sid), None)
        if target is None:
            return
        mine = sorted(bound | {c.partition(".")[0] for c in presented if self._genuine(c)})
        raise UnknownSession(_refusal(sid, target.label, mine, self.credential(mine[0]) if mine else None, http=True))

    def _genuine(self, credential: str) -> bool:
        sid = credential.partition(".")[0]
        return hmac.compare_digest(credential.encode(), self.credential(sid).encode())


def _refusal(sid: str, label: str | None, mine: list[str], own_value: str | None, *, http: bool = False) -> str:
    """The words of a refusal: whose ``sid`` is, and which session(s) the caller may act as
    (``own_value``: what to pass as session_id for the first; over HTTP its credential)."""
    whose = f"another agent's session ({label!r})" if label else "another agent's session"
    if mine:
        own = f"this server acts here only for {', '.join(mine)}: pass your own session_id={own_value!r}"
    elif http:
        own = ("this request presents no session's credential: pass the credential room_join returned as "
               f"session_id (or send it in the {CREDENTIAL_HEADER.title()} header)")
    else:
        own = "this server has joined no session yet: call room_join first and pass the session_id it returns"
    return (f"{sid} is {whose}, not yours; {own}. Ids in listings name other agents: msg_send to them, "
            "never act as them")


__all__ = ["CONNECTION_HEADER", "CREDENTIAL_HEADER", "Selves"]

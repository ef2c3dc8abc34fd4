"""The edit guard asked through its agent's own server: an edit costs the guard's Python start
and one local round trip, not the store's import.

A stdio ``agents-room serve`` runs beside its harness for the whole session, with the store
imported and open. It listens on a Unix socket in the abstract namespace named by the pid of
the process that spawned it, its harness (``agents-room-<uid>-edit-guard-<pid>``: no file to
leave behind or to plant, and gone with the process); the guard (agents_room/harnesses/editguard.py), a child of the
same harness, tries the names of its ancestors, sends the hook's payload with what only it
knows (its harness keys from its environment, its ancestors, its cwd, its ``$AGENTS_ROOM_DB``),
and prints the server's answer. The server judges it with the guard's own rule
(``editguard.judged``) against its open store; only for the store it serves itself.

Both ends check the other's user (``SO_PEERCRED``): a socket in the abstract namespace has no
file permissions, so a process of another user could connect, or take the name first. Where
no server answers (none listening, another store, another user, a timeout, anything broken)
the guard judges in its own process, as it did before: the socket is a shortcut, never the
rule.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..store import Store

# How long the guard waits for the server's answer: past the guard's own wait for the write
# lock (editguard.BUSY_TIMEOUT_S), then it judges in its own process.
ANSWER_TIMEOUT_S = 3.0
# A payload larger than this is not sent (a Write of a huge file): judged in the guard's process.
MAX_REQUEST = 4 << 20
_PEERCRED_SIZE = 12  # struct ucred: pid, uid, gid (3 x int32)


def address(pid: int) -> str:
    """The abstract socket name of the server beside harness ``pid``, for this user."""
    return f"\0agents-room-{os.getuid()}-edit-guard-{pid}"


def _peer_uid(sock: Any, sol_socket: int, so_peercred: int) -> int:
    cred = sock.getsockopt(sol_socket, so_peercred, _PEERCRED_SIZE)
    return int.from_bytes(cred[4:8], sys.byteorder)


# -- the guard's end ----------------------------------------------------------------------------


def ask(request: dict[str, Any], ancestors: list[int], dumps: Any, loads: Any) -> dict[str, Any] | None:
    """The answer (``{"answer": <the hook's output or None>}``) of the server beside the first
    of ``ancestors`` that listens, or None: none did, so the guard judges in its own process.
    ``_socket`` directly: ``socket`` imports ``enum`` and ``selectors``, a tenth of the budget."""
    try:
        import _socket
    except ImportError:
        return None
    body = dumps(request).encode()
    if len(body) > MAX_REQUEST:
        return None
    for pid in ancestors:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(ANSWER_TIMEOUT_S)
            try:
                sock.connect(address(pid))
            except OSError:
                continue  # nobody listens for this one: the next ancestor
            if _peer_uid(sock, _socket.SOL_SOCKET, _socket.SO_PEERCRED) != os.getuid():
                return None  # another user took the name: never trusted
            sock.sendall(body)
            sock.shutdown(_socket.SHUT_WR)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            reply = loads(b"".join(chunks).decode())
            return reply if isinstance(reply, dict) and "answer" in reply else None
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        finally:
            sock.close()
    return None


# -- the server's end ---------------------------------------------------------------------------


class Listener:
    """The thread of a stdio server that answers its harness's edit guard."""

    def __init__(self, store: Store, harness_pid: int, judge: Callable[[Any, Store], dict[str, Any] | None]) -> None:
        import socket
        import threading

        self.store, self.judge = store, judge
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(address(harness_pid))  # OSError: another server of this harness has it
        self.sock.listen(16)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agents-room-edit-guard", daemon=True)

    def start(self) -> Listener:
        self._thread.start()
        return self

    def stop(self) -> None:
        import socket

        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self.sock.close()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed: the server is stopping
            try:
                self._serve(conn)
            except Exception as exc:  # noqa: BLE001 (one guard's call: it judges in its own process)
                print(f"agents-room: edit guard call: {exc}".splitlines()[0], file=sys.stderr)
            finally:
                conn.close()

    def _serve(self, conn: Any) -> None:
        import json
        import socket

        conn.settimeout(ANSWER_TIMEOUT_S)
        if _peer_uid(conn, socket.SOL_SOCKET, socket.SO_PEERCRED) != os.getuid():
            return
        chunks, size = [], 0
        while size <= MAX_REQUEST:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        else:
            return
        answer = self.answer(json.loads(b"".join(chunks).decode()))
        if answer is not None:
            conn.sendall(json.dumps(answer).encode())

    def answer(self, request: Any) -> dict[str, Any] | None:
        """``{"answer": ...}`` for a request of the guard, or None (not ours to judge: the
        guard judges in its own process)."""
        if not isinstance(request, dict) or not self._same_store(request.get("db")):
            return None
        return self.judge(request, self.store)

    def _same_store(self, db: Any) -> bool:
        """Whether the guard's store (its ``--db``, else its ``$AGENTS_ROOM_DB``, else the
        default) is the one this server serves."""
        from ..store.engines import locate

        if db is not None and not isinstance(db, str):
            return False
        try:
            theirs = locate(db, "--db") if db else locate()
        except Exception:  # noqa: BLE001 (a location the guard will refuse itself)
            return False
        return theirs[1] == self.store.location.target


def listener(store: Store, harness_pid: int | None,
             judge: Callable[[Any, Store], dict[str, Any] | None]) -> Listener | None:
    """The running listener of a stdio server spawned by ``harness_pid``, answering with
    ``judge`` (editguard.judged), or None where it cannot listen (the name taken by another
    server of the same harness: the first answers)."""
    if harness_pid is None or harness_pid <= 1 or not sys.platform.startswith("linux"):
        return None
    try:
        return Listener(store, harness_pid, judge).start()
    except OSError:
        return None

"""``agents-room hook --wait``: the Stop-hook wake lever (Claude Code's ``asyncRewake``). It
waits until mail for a session at ``wake`` arrives, prints the facts on stderr and exits 2,
which starts a turn in the idle chat; it exits 0 at its timeout. The rest of the hook, and
what it prints, is agents_room/harnesses/hook.py."""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agents_room.store import Store


def wait(keys: list[str], pids: list[int], path: str, *, lean: bool, timeout: float, poll: float,
         busy_timeout_s: float) -> int:
    """Wait for mail that should wake this session (it is at ``wake``), signal it through the
    store (``stored → offered``), print the facts on stderr, exit 2. Exit 0 at ``timeout``,
    at once when there is no session or it is below ``wake``, and when a newer waiter for
    the same session took over. When the session recorded another lever (the channel), only
    its retries are ours. Between looks it blocks on the store's mail waiter: told at the
    sender's commit on PostgreSQL, a look at the newest seq every ``poll`` on SQLite.
    ``keys``, ``pids``: the session's harness keys and the hook's ancestors (agents_room/harnesses/hook.py);
    ``lean``: ``path`` is a SQLite file (none there: no session to wait for)."""
    from agents_room.harnesses.wake import RETRY_LOOK_S, StopHookLever, deliver
    from agents_room.store import Store

    deadline = time.monotonic() + timeout
    if lean and not os.path.exists(path):
        return 0
    with Store.open(path, busy_timeout_s=busy_timeout_s, verify=False) as store:
        session = store.hook_session(keys, pids)
        if session is None or session.autonomy != "wake":
            return 0  # only `wake` may start a turn; below it, mail waits for the next one
        lever = StopHookLever(sys.stderr)
        from ..safe_write import UnsafeWrite

        try:
            marker = _claim_waiter(waiters_folder(store), session.id)
        except UnsafeWrite as exc:
            print(f"agents-room: no wake waiter: {exc}", file=sys.stderr)
            return 0
        waiter = store.mail_waiter(poll)
        try:
            waiter.watch(session.id)
            last_look = float("-inf")
            while time.monotonic() < deadline:
                if not _still_waiter(marker):
                    return 0
                # At most ``poll`` per wait: a newer waiter is noticed that soon.
                told = waiter.wait(min(poll, max(0.0, deadline - time.monotonic())))
                if told or time.monotonic() - last_look >= RETRY_LOOK_S:
                    last_look = time.monotonic()
                    if deliver(store, lever, session_id=session.id, adopt_retries=True):
                        return 2
            return 0
        finally:
            waiter.close()
            _release_waiter(marker)


# One waiter per session: each Stop starts a new one, and the newest wins, so waiters do not
# pile up while a chat stops many times. The marker lives beside the store (never the store's
# own files, whose descriptors must not be opened outside SQLite); for a store with no local
# file (PostgreSQL), in this user's folder of the temporary directory (a session's waiters
# run on its host).


def waiters_folder(store: Store) -> str:
    files = store.db.files()
    if files:
        return os.path.join(os.path.dirname(files[0]), "waiters")
    import hashlib
    import tempfile

    from ..safe_write import own_folder

    digest = hashlib.sha256(str(store.location).encode()).hexdigest()[:16]
    return os.path.join(own_folder(os.path.join(tempfile.gettempdir(), f"agents-room-{os.getuid()}")),
                        f"waiters-{digest}")


def _claim_waiter(folder: str, session_id: str) -> str:
    from ..safe_write import write_file

    os.makedirs(folder, mode=0o700, exist_ok=True)
    marker = os.path.join(folder, session_id)
    # atomic, through an exclusive temporary file: a reader sees the old waiter or the new one
    write_file(marker, str(os.getpid()), within=folder)
    return marker


def _still_waiter(marker: str) -> bool:
    try:
        with open(marker) as f:
            return f.read() == str(os.getpid())
    except OSError:
        return False


def _release_waiter(marker: str) -> None:
    if _still_waiter(marker):
        try:
            os.unlink(marker)
        except OSError:
            pass

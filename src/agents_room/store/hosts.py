"""Which host a process runs on, and what one host may say of another host's sessions.

A session records the host its server runs on (``sessions.host``). ``/proc`` tells the truth
about the processes of the host that reads it only, so liveness (store/liveness.py) is
judged from the process scan for sessions of this host, and for a session of another host
from what the store holds about it:

- ``gone`` when a check on its own host proved it gone (``sessions.gone_at``, written by that
  host) and it has made no call since;
- ``alive`` when it made a call within ``ALIVE_WITHIN_S`` (every write call records
  ``last_seen``, a read call when it is 30 s old). An agent idle longer shows ``unknown``: no
  heartbeat writes ``last_seen`` for it, since a later ``last_seen`` is what confirms a wake
  offer (store/wake.py);
- ``unknown`` otherwise: quiet, and its own host has said nothing. Another host's word is
  never taken for a guess, and ``prune`` removes only what is proven gone.

The host id: ``$AGENTS_ROOM_HOST_ID`` when set (tests, containers that share a kernel but not
a PID namespace), else the machine's ``/etc/machine-id``, else its host name.
"""

from __future__ import annotations

import os
import re

from .errors import InvalidArgument, StoreError

ENV = "AGENTS_ROOM_HOST_ID"
# A session that made a call this recently is alive, whatever host it is on: three times the
# interval at which read calls record last_seen (store/__init__.py, TOUCH_INTERVAL_S).
ALIVE_WITHIN_S = 90.0
_VALID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}")
_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def host_id(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """This process's host id (see the module docstring). A set but malformed
    ``$AGENTS_ROOM_HOST_ID`` is refused in one line naming it."""
    env = os.environ if env is None else env
    given = env.get(ENV)
    if given is not None:
        if not _VALID.fullmatch(given):
            raise StoreError(f"{ENV}={given[:70]!r} is not a host id: 1 to 64 characters, letters, digits and "
                             "'._:@-', starting with a letter or digit; unset it for this machine's id")
        return given
    for path in _MACHINE_ID_FILES:
        try:
            with open(path) as fh:
                found = fh.read().strip()
        except OSError:
            continue
        if _VALID.fullmatch(found):
            return found
    import socket  # only where there is no machine id

    return socket.gethostname() or "localhost"


def checked_host(value: str, field: str) -> str:
    """A host id another process states (an HTTP client, for its agent): refused when malformed."""
    if not _VALID.fullmatch(value):
        raise InvalidArgument(field, f"{value[:70]!r} is not a host id: 1 to 64 characters, letters, digits and "
                                     "'._:@-', starting with a letter or digit")
    return value

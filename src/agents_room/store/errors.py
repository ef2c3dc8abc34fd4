"""One error tree for the store.

Every error carries a stable ``code`` (the prefix adapters put in front of the text) and
says whether it is *definite*: a definite error guarantees the operation changed nothing,
so a client may record it as ``fail``; an indefinite one (``store_error``) may have
happened, and a careful client records ``info``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the hook's news path imports this module
    from typing import Any


class RoomError(Exception):
    """Base of every error the store raises on purpose."""

    code = "store_error"
    definite = False

    def __init__(self, text: str, **data: Any) -> None:
        super().__init__(text)
        self.text = text
        self.data = data

    def __str__(self) -> str:
        return f"{self.code}: {self.text}"


class InvalidArgument(RoomError):
    """An argument is malformed or out of bounds; ``field`` names it."""

    code = "invalid_argument"
    definite = True

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)
        self.field = field


class UnknownSession(RoomError):
    """A session id names no live session. The text says what the caller probably meant."""

    code = "unknown_session"
    definite = True


class LeaseNotHeld(RoomError):
    """Renew or release of a lease the caller does not hold; ``holder`` is who does, if any."""

    code = "lease_not_held"
    definite = True


class NotRecipient(RoomError):
    """An ack for a message that was never delivered to the caller."""

    code = "not_recipient"
    definite = True


class StoreBusy(RoomError):
    """The write lock was not had within the bounded wait; nothing was changed. Retryable."""

    code = "store_busy"
    definite = True


class StoreError(RoomError):
    """The database failed (disk full, I/O, corruption, refused file). Outcome may be unknown."""

    code = "store_error"
    definite = False


class NoStore(StoreError):
    """There is no store at the location yet, and the command only looks, so it made none.
    Not a failure in itself: a room is made by the first agent's join or a person's send."""


class StoreUnreachable(StoreError):
    """The database cannot be reached (PostgreSQL down, refusing, or out of the network's
    reach). Nothing was done; the next call tries to connect again."""


ERROR_CODES = tuple(
    cls.code for cls in (InvalidArgument, UnknownSession, LeaseNotHeld, NotRecipient, StoreBusy, StoreError)
)

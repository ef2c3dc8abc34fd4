"""What a command that only looks (``who``, ``inbox``, ``prune``, ``doctor``) says where there
is no store yet: not a failure. Nobody has made the room: the first agent's join makes it, and
so does a person's ``agents-room send``, which a person may type before any agent is started
(the message waits in the room's history, ``room_history``, for the agents that join later).

What is wrong is a location where no store can ever be made (a folder that is a file, a folder
this user cannot write in): that is refused in one line naming the path and the reason, as
``install`` refuses to write it (store/location.py, :func:`unusable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store.location import Location

MAKES_ONE = "the first agent to join makes it, or a person's message: agents-room send '*' SUBJECT BODY"


def check(location: Location) -> None:
    """Raise ``StoreError`` naming the path and the reason when no store can ever be made at
    ``location`` (store/location.py, :func:`unusable`); nothing when one exists or can be made."""
    from .store import StoreError
    from .store.location import unusable

    problem = unusable(location)
    if problem:
        raise StoreError(f"no store can be made at {location} ({location.origin}): {problem}")


def line(location: Location) -> str:
    """The line a looking command prints where ``location`` holds no store yet. Raises
    ``StoreError`` naming the path and the reason when no store can ever be made there."""
    check(location)
    return f"no room yet: there is no store at {location} ({location.origin}), and nothing was created; {MAKES_ONE}"

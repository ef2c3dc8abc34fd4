"""The command the reference-transaction hook ``agents-room guard install`` writes runs:
``<python> -I -S <this file> [--db STORE] prepared`` (agents_room.guard_refs), started as
cheaply as the pre-commit guard's entry (guard_entry.py)."""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from agents_room.guard_refs import main

    sys.exit(main())

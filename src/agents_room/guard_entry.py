"""The command the pre-commit hook ``agents-room guard install`` writes runs:
``<python> -I -S <this file> [--db STORE]`` (agents_room.guard), started as cheaply as
Python starts, as the mail hook's entry is (hook_entry.py says why: every commit pays it)."""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from agents_room.guard import main

    sys.exit(main())

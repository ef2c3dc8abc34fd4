"""The edit guard's installed command: ``<python> -I -S <this file> --harness H --edits claim``
(or ``--read``), the hook of a harness's file-writing and read tools
(agents_room.harnesses.editguard), started as cheaply as Python starts: without ``site``, with
the folder holding the ``agents_room`` package added after the standard library, as
agents_room/hook_entry.py does for the news hook.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from agents_room.harnesses.editguard import main

    sys.exit(main())

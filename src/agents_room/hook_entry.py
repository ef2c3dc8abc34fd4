"""The hook command ``agents-room install`` writes: ``<python> -I -S <this file> [hook flags]``,
the same command as ``agents-room hook`` (agents_room.harnesses.hook), started as cheaply as Python starts.

A harness runs it on every event, so the interpreter's start-up is most of its cost. ``-S``
skips ``site``: the scan of site-packages and its ``.pth`` files (an editable install's import
finder among them), which costs more than the hook's own work. ``-I`` keeps the harness's
``PYTHON*`` variables and this file's own folder off the import path. So the folder holding
the ``agents_room`` package (``src/`` of a checkout, or ``site-packages``) is added to the path
here, after the standard library as ``site`` would add it: the hook, and the store it imports
when there is news, need nothing else but the standard library.
"""

import os
import sys

if __name__ == "__main__":
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from agents_room.harnesses.hook import main

    sys.exit(main())

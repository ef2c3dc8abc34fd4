"""SHA-256 of an open file, as the store records a read (store/reads.py) and the edit guard
compares one (agents_room/harnesses/editguard.py).

``hashlib`` loads OpenSSL on import, which costs the edit guard (a process per tool call) more
than hashing a source file; CPython's own SHA-256 (``_sha256``) needs no load but hashes about
eight times slower. So a file up to :data:`SMALL_BYTES`, in a process that has not loaded
``hashlib`` yet, is hashed by the built-in one; anything else by ``hashlib``. Both give the
same digest. Stdlib only, ``os`` and ``sys``: the guard's read-only look imports this module.
"""

from __future__ import annotations

import os
import sys

# Where the built-in hash's slower bytes start to cost more than loading OpenSSL (about 3 ms).
SMALL_BYTES = 512 * 1024
CHUNK = 1 << 18


def sha256_hex(fh: object) -> str:
    """The hex SHA-256 of the open binary file ``fh``, read from where it stands to its end."""
    size = os.fstat(fh.fileno()).st_size  # type: ignore[attr-defined]
    maker = None
    if size <= SMALL_BYTES and "hashlib" not in sys.modules:
        try:
            from _sha256 import sha256 as maker  # type: ignore[no-redef]
        except ImportError:
            maker = None
    if maker is None:
        import hashlib

        return hashlib.file_digest(fh, "sha256").hexdigest()  # type: ignore[arg-type]
    digest = maker()
    while chunk := fh.read(CHUNK):  # type: ignore[attr-defined]
        digest.update(chunk)
    return digest.hexdigest()

"""JSON text in one line, from an encoder made once.

``json.JSONEncoder.encode`` makes a new C encoder on every call: about 2 µs, paid on every
write (its event's payload) and, in the MCP adapter, on every tool answer (its text).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def compact_json(*, separators: tuple[str, str] = (",", ":"), ensure_ascii: bool = True) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=..., ensure_ascii=...).encode``, the same text, with its C
    encoder made once. No circular-reference check: what it encodes is rows and records,
    never cyclic (and that check keeps its state in the encoder, which is shared here)."""
    encoder = json.JSONEncoder(separators=separators, ensure_ascii=ensure_ascii)
    make = json.encoder.c_make_encoder
    if make is None:  # a Python built without the _json accelerator
        return encoder.encode
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    run = make(None, encoder.default, quote, None, separators[1], separators[0], False, False, True)

    def encode(value: Any) -> str:
        return "".join(run(value, 0))

    return encode

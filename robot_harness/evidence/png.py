"""A minimal RGB PNG encoder (no imaging dependency on the robot)."""
from __future__ import annotations

import struct
import zlib

__all__ = ["encode_png"]


def encode_png(data: bytes, width: int, height: int, step: int, *, bgr: bool) -> bytes:
    """rgb8 (or bgr8) rows of ``step`` bytes as a PNG file."""
    rows = []
    for r in range(height):
        row = data[r * step: r * step + width * 3]
        if bgr:
            row = bytes(b for i in range(0, len(row), 3) for b in (row[i + 2], row[i + 1], row[i]))
        rows.append(b"\x00" + row)

    def chunk(tag: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", zlib.crc32(tag + payload) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b"")

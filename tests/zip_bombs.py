"""Hand-built zip archives for the import fuzz suite: real deflate bombs, written in a second or two.

`write_zip` writes each member as raw deflate. A member given as an int is that many zero bytes, compressed as
one full-flush block of zeros repeated (a byte-aligned block that refers to nothing before it), so a 2 GiB member
costs one 16 MiB compression and a CRC pass; sizes and CRCs are the true ones, so a reader that trusts them
inflates the whole thing. Sizes must stay under 4 GiB (zip64 only for the member count).
"""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache
from pathlib import Path

__all__ = ["write_zip"]

_BLOCK = 1 << 24
_FINAL_EMPTY_BLOCK = b"\x03\x00"


@lru_cache(maxsize=4)
def _zeros(size: int) -> tuple[bytes, int]:
    """Raw deflate of `size` zero bytes (a multiple of 16 MiB is built from one block) and its CRC-32."""
    blocks, rest = divmod(size, _BLOCK)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(_BLOCK)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = block * blocks + tail.compress(bytes(rest)) + tail.flush() if rest else block * blocks + _FINAL_EMPTY_BLOCK
    crc = 0
    for _ in range(blocks):
        crc = zlib.crc32(zeros, crc)
    return data, zlib.crc32(bytes(rest), crc)


def _deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def write_zip(path: Path, members: list[tuple[str, bytes | int]]) -> Path:
    """A zip archive of `members` (name, content; an int content is that many zeros) at `path`."""
    local = bytearray()
    central = bytearray()
    for name, content in members:
        if isinstance(content, int):
            packed, crc = _zeros(content)
            size = content
        else:
            packed, crc, size = _deflate(content), zlib.crc32(content), len(content)
        encoded = name.encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(packed), size, len(encoded), 0)
        local += encoded + packed
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            20,
            0,
            8,
            0,
            0x21,
            crc,
            len(packed),
            size,
            len(encoded),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        central += encoded
    count = len(members)
    zip64 = b""
    if count > 0xFFFF:  # more entries than the classic end record counts: a zip64 end record and its locator
        at = len(local) + len(central)
        zip64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central), len(local))
        zip64 += struct.pack("<IIQI", 0x07064B50, 0, at, 1)
        count = 0xFFFF
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), len(local), 0)
    path.write_bytes(bytes(local) + bytes(central) + zip64 + end)
    return path

"""Outputs a hostile runtime serves in place of its real ones (RuntimeFaults.served_output): a file that starts as a
PNG and is zeros after its signature, and a decompression bomb (a complete, valid PNG whose pixels are far more than
an image of a test generation has)."""

from __future__ import annotations

import struct
import zlib
from functools import cache
from typing import Final

PNG_SIGNATURE: Final[bytes] = b"\x89PNG\r\n\x1a\n"
#: the signature, then zeros: as long as a generated 256x256 image, so no size floor tells it apart
SIGNATURE_THEN_ZEROS: Final[bytes] = PNG_SIGNATURE + bytes(200_000)
#: the bomb's side in pixels: 10,000 x 10,000 is 1.1 x Pillow's MAX_IMAGE_PIXELS (a warning there, not its error)
BOMB_SIDE: Final[int] = 10_000


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data and the CRC of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def blank_png(width: int, height: int) -> bytes:
    """A complete 1-bit greyscale PNG of zeros, compressed row by row (a huge one stays a few KB)."""
    row = bytes(1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return (PNG_SIGNATURE + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))


@cache
def bomb_png() -> bytes:
    """A decompression bomb: a valid PNG of BOMB_SIDE x BOMB_SIDE pixels in about 12 KB."""
    return blank_png(BOMB_SIDE, BOMB_SIDE)

"""A minimal PNG encoder (stdlib only): 8-bit indexed-colour images, as the fake's desktop
screenshots are drawn in a handful of colours.

The bytes depend only on the pixels, the palette and the zlib build (fixed compression level,
no timestamps or text chunks), so the same screen always gives the same file.

Example::

    png = encode_png(2, 1, b"\\x00\\x01", [(0, 0, 0), (255, 255, 255)])
    png[:8] == PNG_SIGNATURE   # True
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

__all__ = ["PNG_SIGNATURE", "encode_png"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: Colour type 3 (palette indices), 8 bits per index.
_INDEXED = 3
_BIT_DEPTH = 8
#: A fixed level: the same pixels always compress to the same bytes.
_COMPRESSION_LEVEL = 6


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(payload, zlib.crc32(kind))
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def encode_png(
    width: int, height: int, pixels: bytes | bytearray, palette: Sequence[tuple[int, int, int]]
) -> bytes:
    """A PNG of ``width`` x ``height`` palette indices (``pixels``, row by row, one byte per
    pixel) in the colours of ``palette`` (at most 256 RGB triples).

    ``ValueError`` when the sizes do not add up or an index has no colour.

    Example::

        encode_png(1, 1, b"\\x00", [(255, 0, 0)])   # a single red pixel
    """
    if width < 1 or height < 1:
        raise ValueError("a PNG is at least 1x1")
    if len(pixels) != width * height:
        raise ValueError(f"expected {width * height} pixels, got {len(pixels)}")
    if not 1 <= len(palette) <= 256:
        raise ValueError("a palette holds 1 to 256 colours")
    # What is left once every valid index is deleted (a C-speed scan of a screen's pixels).
    if bytes(pixels).translate(None, bytes(range(len(palette)))):
        raise ValueError("a pixel names a colour the palette does not have")
    header = struct.pack(">IIBBBBB", width, height, _BIT_DEPTH, _INDEXED, 0, 0, 0)
    plte = b"".join(bytes(colour) for colour in palette)
    view = memoryview(pixels)
    # Filter type 0 (none) before each row: the flat colours compress well without filtering.
    raw = b"".join(b"\x00" + view[row * width : (row + 1) * width] for row in range(height))
    return b"".join(
        (
            PNG_SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"PLTE", plte),
            _chunk(b"IDAT", zlib.compress(raw, _COMPRESSION_LEVEL)),
            _chunk(b"IEND", b""),
        )
    )

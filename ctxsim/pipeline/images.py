"""What an image costs (SPEC §11): dimensions from the image header, and the providers' rules.

Importers keep an image's size, never its bytes, so they read the dimensions here while the
data is at hand and store them on the binary part (`width`, `height`, and the session's
provider family as `provider`). Counting then needs only the part:

- `bytes4`: ceil(base64 length / 4), AIVAX's estimate (SPEC §5), and the fallback for an image
  whose header could not be read;
- `anthropic`: scaled to fit 1568 px on the long edge and 1.15 megapixels, ceil(w·h / 750);
- `openai`: high detail scaled to fit 2048×2048, then the shortest side to 768, 85 + 170 per
  512-px tile; low detail 85;
- `auto`: the rule of the part's provider family, bytes4 when it has none.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping
from typing import Any

IMAGE_RULES = ("auto", "anthropic", "openai", "bytes4")
PROVIDER_RULES = ("anthropic", "openai")

# Enough of a base64 payload to reach the size fields of every supported format (a JPEG's
# frame header can sit after an EXIF block; 64 KiB covers the usual thumbnails).
HEADER_BASE64_CHARS = 88_000


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or WebP header; None when unreadable."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
    elif data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
    elif data.startswith(b"\xff\xd8"):
        found = _jpeg_size(data)
        if found is None:
            return None
        width, height = found
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        found = _webp_size(data)
        if found is None:
            return None
        width, height = found
    else:
        return None
    if width <= 0 or height <= 0:
        return None
    return width, height


# Start-of-frame markers carry the dimensions; C4 (Huffman tables), C8 and CC are not frames.
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if marker in _JPEG_FRAMES:
            if pos + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            return width, height
        pos += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def base64_image_size(data: str) -> tuple[int, int] | None:
    """Dimensions of a base64-encoded image, decoding only the start of it."""
    head = "".join(data[:HEADER_BASE64_CHARS].split())
    head = head[: len(head) // 4 * 4]
    try:
        raw = base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return None
    return image_size(raw)


def anthropic_tokens(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    w = max(1, int(width * scale))
    h = max(1, int(height * scale))
    return math.ceil(w * h / 750)


def openai_tokens(width: int, height: int, detail: str = "high") -> int:
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(int(w) / 512) * math.ceil(int(h) / 512)
    return 85 + 170 * max(1, tiles)


def bytes4_tokens(part: Mapping[str, Any]) -> int:
    return math.ceil(int(part.get("base64_length", 0) or 0) / 4)


def part_tokens(part: Mapping[str, Any], rule: str = "bytes4") -> int:
    """Tokens of one binary part under `rule` (one of IMAGE_RULES).

    Invariant: `bytes4`, a part that is not an image, and an image without readable
    dimensions all cost ceil(base64 length / 4), SPEC §5's formula.
    """
    if rule == "bytes4" or part.get("type") != "image":
        return bytes4_tokens(part)
    if rule == "auto":
        rule = part.get("provider") or "bytes4"
        if rule not in PROVIDER_RULES:
            return bytes4_tokens(part)
    width, height = part.get("width"), part.get("height")
    if not isinstance(width, int) or not isinstance(height, int) or width <= 0 or height <= 0:
        return bytes4_tokens(part)
    if rule == "anthropic":
        return anthropic_tokens(width, height)
    if rule == "openai":
        return openai_tokens(width, height, str(part.get("detail") or "high"))
    return bytes4_tokens(part)

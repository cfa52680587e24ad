"""SPEC §11 image rules: dimensions from the header, the providers' rules, bytes4 fallback."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from ctxsim.importers import load
from ctxsim.pipeline.images import (
    anthropic_tokens,
    base64_image_size,
    image_size,
    openai_tokens,
    part_tokens,
)
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.tokens import get_counter, message_tokens


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk
            + struct.pack(">I", zlib.crc32(chunk)) + b"\x00" * 16)


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(64)
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + bytes(9)
    return b"\xff\xd8" + app0 + dqt + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + b";"


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00" \
        + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"VP8L" + struct.pack("<I", 5) + b"\x2f" + bits.to_bytes(4, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def webp_vp8(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    body = b"VP8 " + struct.pack("<I", len(frame)) + frame
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


@pytest.mark.parametrize("make", [png, jpeg, gif, webp_vp8x, webp_vp8l, webp_vp8])
def test_it_reads_the_dimensions_from_every_supported_header(make):
    assert image_size(make(1856, 264)) == (1856, 264)
    assert base64_image_size(base64.b64encode(make(640, 480)).decode()) == (640, 480)


def test_an_unknown_or_cut_header_has_no_dimensions():
    assert image_size(b"not an image at all") is None
    assert image_size(png(10, 10)[:20]) is None
    assert image_size(b"\xff\xd8\xff\xe0\x00\x10JFIF") is None
    assert base64_image_size("!!!not base64!!!") is None


def test_anthropic_scales_to_1568_px_and_1_15_megapixels_then_divides_by_750():
    assert anthropic_tokens(1000, 1000) == 1334  # 1,000,000 / 750, no scaling
    assert anthropic_tokens(200, 200) == 54  # 40,000 / 750 = 53.3
    # 3000×2000 is over 1.15 MP: scale sqrt(1.15e6 / 6e6) = 0.4378 → 1313×875 → 1531.8
    assert anthropic_tokens(3000, 2000) == 1532
    # 4000×500: the long edge first: 1568/4000 → 1568×196 = 307,328 px → 409.8
    assert anthropic_tokens(4000, 500) == 410


def test_openai_counts_512_px_tiles_after_fitting_2048_and_768():
    assert openai_tokens(1856, 264) == 765  # 4×1 tiles: the shared Codex screenshot
    assert openai_tokens(1024, 1024) == 765  # → 768×768, 2×2 tiles
    assert openai_tokens(2048, 4096) == 1105  # → 1024×2048 → 768×1536, 2×3 tiles
    assert openai_tokens(100, 100) == 255  # one tile
    assert openai_tokens(4096, 8192, "low") == 85


def _part(data: bytes, provider: str | None = None) -> dict:
    encoded = base64.b64encode(data).decode()
    part = {"type": "image", "media_type": "image/png", "base64_length": len(encoded)}
    size = base64_image_size(encoded)
    if size:
        part["width"], part["height"] = size
    if provider:
        part["provider"] = provider
    return part


def test_auto_takes_the_parts_provider_and_bytes4_is_base64_over_4():
    part = _part(png(1024, 1024) + bytes(30_000), "openai")
    assert part_tokens(part, "bytes4") == -(-part["base64_length"] // 4)
    assert part_tokens(part, "auto") == 765
    assert part_tokens(part, "anthropic") == 1399  # 1,048,576 / 750
    assert part_tokens(_part(png(1024, 1024)), "auto") == part_tokens(
        _part(png(1024, 1024)), "bytes4"
    )  # no provider known: AIVAX's estimate


def test_an_unreadable_image_falls_back_to_bytes4_under_every_rule():
    part = _part(b"garbage bytes that are no image" * 10, "anthropic")
    assert "width" not in part
    for rule in ("auto", "anthropic", "openai", "bytes4"):
        assert part_tokens(part, rule) == -(-part["base64_length"] // 4)


def test_import_measures_images_and_warns_about_unreadable_ones(tmp_path):
    good = base64.b64encode(png(1856, 264)).decode()
    bad = base64.b64encode(b"\x00" * 300).decode()
    body = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{good}"}},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{bad}",
                                                "detail": "low"}},
        ]},
    ]}
    path = tmp_path / "chat.json"
    path.write_text(__import__("json").dumps(body))
    result = load(path)
    good_part, bad_part = result.sessions[0].messages[0].meta["binary_parts"]
    assert (good_part["width"], good_part["height"], good_part["provider"]) == (1856, 264,
                                                                                "openai")
    assert bad_part["unreadable"] is True and bad_part["detail"] == "low"
    assert any("unreadable header" in w for w in result.warnings)


def test_the_replay_counts_images_by_its_image_rule_and_the_aivax_stages_keep_bytes4():
    part = _part(png(1856, 264) + bytes(60_000), "openai")
    history = [
        Message.of("user", "see", meta={"binary_parts": [part]}),
        Message.of("assistant", "ok"),
    ]
    counter = get_counter("cl100k_base")
    plain = message_tokens(history[0], counter)
    assert plain == message_tokens(history[0], counter, "bytes4")
    assert message_tokens(history[0], counter, "auto") == plain - part_tokens(part) + 765
    raw = {rule: next(iter(replay(history, "none", {"image_rule": rule}).calls())).raw_tokens
           for rule in ("auto", "bytes4")}
    assert raw["bytes4"] - raw["auto"] == part_tokens(part, "bytes4") - 765
    # AIVAX's context limit measures with base64/4 whatever the replay's rule: the prompt is
    # 800-odd tokens by OpenAI's rule, but ~20k by AIVAX's, so the gateway refuses it.
    rep = replay(history, "aivax", {"image_rule": "openai", "contextMaximumSize": 5000,
                                    "contextOverflowAction": "Throw"})
    first = next(iter(rep.calls()))
    assert first.raw_tokens < 5000
    assert first.error is not None

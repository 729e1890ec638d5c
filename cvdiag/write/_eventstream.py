"""Decode AWS event-stream frames (``application/vnd.amazon.eventstream``) as they pass by.

Bedrock's streaming APIs answer in binary frames: a 12-byte prelude (total length,
headers length, CRC32 of the first 8 bytes), the headers, the payload and a CRC32 of
the whole frame. ``FrameDecoder`` is fed the body in whatever pieces the network gives
and returns each whole frame once; it never holds more than one frame, and a frame
larger than ``FRAME_MAX`` is skipped byte by byte rather than buffered. A bad CRC or an
impossible length makes the stream unreadable (``broken``): facts stay unknown, never
wrong. Read-only and never raises: botocore itself decodes the same bytes for the caller.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

__all__ = ["FRAME_MAX", "FrameDecoder", "decode_headers"]

#: Frames up to this size are decoded; larger ones (never a Bedrock event) are skipped.
FRAME_MAX = 1 << 20
_PRELUDE = 12
_TRAILER = 4
_MIN_FRAME = _PRELUDE + _TRAILER
#: botocore's own limit on one frame; beyond it the stream is not event-stream at all.
_FRAME_LIMIT = 24 << 20

# Header value types (the event-stream specification): fixed sizes, and the two with a length.
_FIXED: dict[int, tuple[int, Any]] = {
    2: (1, lambda b: struct.unpack(">b", b)[0]),
    3: (2, lambda b: struct.unpack(">h", b)[0]),
    4: (4, lambda b: struct.unpack(">i", b)[0]),
    5: (8, lambda b: struct.unpack(">q", b)[0]),
    8: (8, lambda b: struct.unpack(">q", b)[0]),  # timestamp, milliseconds
    9: (16, bytes.hex),  # uuid
}

Frame = tuple[dict[str, Any], bytes]


def decode_headers(raw: bytes) -> dict[str, Any]:
    """The headers block of one frame as a dict; raises ValueError when malformed."""
    headers: dict[str, Any] = {}
    i, end = 0, len(raw)
    while i < end:
        name_len = raw[i]
        name = raw[i + 1 : i + 1 + name_len].decode("utf-8", "replace")
        i += 1 + name_len
        kind = raw[i]
        i += 1
        if kind in (0, 1):
            headers[name] = kind == 0
        elif kind in (6, 7):
            (size,) = struct.unpack_from(">H", raw, i)
            value = raw[i + 2 : i + 2 + size]
            headers[name] = value.decode("utf-8", "replace") if kind == 7 else value
            i += 2 + size
        elif kind in _FIXED:
            size, convert = _FIXED[kind]
            headers[name] = convert(raw[i : i + size])
            i += size
        else:
            raise ValueError(f"unknown event-stream header type {kind}")
        if i > end:
            raise ValueError("event-stream header runs past its block")
    return headers


class FrameDecoder:
    """Whole frames out of a byte stream fed in any pieces; bounded, never raises."""

    __slots__ = ("_buffer", "_skip", "broken", "frames", "skipped")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skip = 0
        self.broken = False
        #: Frames decoded, and frames skipped for their size.
        self.frames = 0
        self.skipped = 0

    @property
    def idle(self) -> bool:
        """Between frames: nothing of a frame is pending."""
        return not self._buffer and not self._skip

    def feed(self, data: bytes) -> list[Frame]:
        """The frames that ``data`` completes, in order."""
        if self.broken or not data:
            return []
        if self._skip:
            taken = min(self._skip, len(data))
            self._skip -= taken
            data = data[taken:]
        buffer = self._buffer
        buffer += data
        out: list[Frame] = []
        while len(buffer) >= _PRELUDE and not self.broken:
            total, headers_len, prelude_crc = struct.unpack_from(">III", buffer)
            if zlib.crc32(buffer[:8]) != prelude_crc or total < _MIN_FRAME + headers_len or total > _FRAME_LIMIT:
                self._break()
                break
            if total > FRAME_MAX:  # too big to keep: skip it, never buffer it
                self.skipped += 1
                self._skip = max(0, total - len(buffer))
                del buffer[: min(total, len(buffer))]
                continue
            if len(buffer) < total:
                break
            frame = bytes(buffer[:total])
            del buffer[:total]
            (frame_crc,) = struct.unpack_from(">I", frame, total - _TRAILER)
            if zlib.crc32(frame[:-_TRAILER]) != frame_crc:
                self._break()
                break
            try:
                headers = decode_headers(frame[_PRELUDE : _PRELUDE + headers_len])
            except (ValueError, IndexError, struct.error):
                self._break()
                break
            self.frames += 1
            out.append((headers, frame[_PRELUDE + headers_len : total - _TRAILER]))
        return out

    def _break(self) -> None:
        self.broken = True
        self._buffer = bytearray()
        self._skip = 0

"""The protobuf wire format, hand-written for the few Pulsar commands the Python suites encode and
decode (field numbers from src/protocol/pulsar_api.proto; no protobuf package in the venv).
Standard library only."""

from __future__ import annotations

from typing import Any

# A decoded message: field number -> values (varints as int, length-delimited as bytes).
Fields = dict[int, list[Any]]


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int32/int64 are 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fv(num: int, value: int) -> bytes:
    """A varint field (uint64, int32, bool, enum)."""
    return varint(num << 3) + varint(int(value))


def fb(num: int, data: str | bytes) -> bytes:
    """A length-delimited field (string, bytes, message)."""
    if isinstance(data, str):
        data = data.encode()
    return varint((num << 3) | 2) + varint(len(data)) + data


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at buf[pos:] and the position after it."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def decode(buf: bytes) -> Fields:
    """Message bytes -> {field number: [values]} (varints as int, length-delimited as bytes,
    fixed64/fixed32 as their raw bytes); ValueError on another wire type."""
    fields: Fields = {}
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        v: Any
        if wt == 0:
            v, pos = read_varint(buf, pos)
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            v, pos = bytes(buf[pos:pos + n]), pos + n
        elif wt == 1:
            v, pos = buf[pos:pos + 8], pos + 8
        elif wt == 5:
            v, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wt}")
        fields.setdefault(num, []).append(v)
    return fields

#!/usr/bin/env python3
"""Reads TensorBoard event files without TensorFlow or protobuf: the TFRecord framing (every
record's masked CRC32C of its length and of its data is checked) and the protobuf wire format of
tensorflow.Event and Summary, decoded by hand. Independent of tnt's writer (tensorboard.cpp): its
CRC32C is a bitwise loop over the Castagnoli polynomial, and it decodes any field order and skips
unknown fields as protobuf readers do.

  python3 tensorboard_reader.py LOG_DIR   # prints run, tag, step, value for every scalar
"""
import struct
import sys
from pathlib import Path

_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class CorruptFile(Exception):
    pass


def records(path):
    """Every record's data, after checking both CRCs."""
    data = Path(path).read_bytes()
    pos = 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise CorruptFile(f"{path}: truncated record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(header)) != header_crc:
            raise CorruptFile(f"{path}: bad length CRC at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or pos + 16 + length > len(data):
            raise CorruptFile(f"{path}: truncated record at byte {pos}")
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked(crc32c(body)) != body_crc:
            raise CorruptFile(f"{path}: bad data CRC in the record at byte {pos}")
        yield body
        pos += 16 + length


def varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise CorruptFile("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf):
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes else."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise CorruptFile(f"unsupported wire type {wire}")
        yield number, wire, value


def event(buf):
    """tensorflow.Event: wall_time, step, file_version, and the summary's scalars {tag: value}."""
    out = {"wall_time": None, "step": 0, "file_version": None, "scalars": {}}
    for number, wire, value in fields(buf):
        if number == 1 and wire == 1:
            out["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            out["step"] = value
        elif number == 3 and wire == 2:
            out["file_version"] = value.decode()
        elif number == 5 and wire == 2:  # Summary
            for n, w, v in fields(value):
                if n != 1 or w != 2:
                    continue
                tag, simple = None, None
                for vn, vw, vv in fields(v):  # Summary.Value
                    if vn == 1 and vw == 2:
                        tag = vv.decode()
                    elif vn == 2 and vw == 5:
                        simple = struct.unpack("<f", vv)[0]
                if tag is not None and simple is not None:
                    out["scalars"][tag] = simple
    return out


def read_run(folder):
    """{tag: [(step, value), ...]} of every event file in a run folder; checks the file version."""
    scalars = {}
    files = sorted(Path(folder).glob("*tfevents*"))
    if not files:
        raise CorruptFile(f"{folder}: no event file")
    for f in files:
        events = [event(r) for r in records(f)]
        if not events or events[0]["file_version"] != "brain.Event:2":
            raise CorruptFile(f"{f}: the first event is not file_version brain.Event:2")
        for e in events[1:]:
            for tag, value in e["scalars"].items():
                scalars.setdefault(tag, []).append((e["step"], value))
    return scalars


if __name__ == "__main__":
    root = Path(sys.argv[1])
    for run in sorted(p for p in root.rglob("*") if p.is_dir() and any(p.glob("*tfevents*"))):
        for tag, points in sorted(read_run(run).items()):
            for step, value in points:
                print(f"{run.relative_to(root)} {tag} {step} {value:.6g}")

"""Helpers for the resume-anchor tests (ground truth from /proc and the zip layout)."""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile

import torch

PAGE = 4096


def sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def random_bits(numel: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """A tensor of `dtype` whose bytes are random: NaN payloads, infinities, -0.0, subnormals."""
    g = torch.Generator().manual_seed(seed)
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (numel * size,), dtype=torch.uint8, generator=g)
    return raw.view(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.reshape(-1).contiguous().view(torch.uint8),
                            b.reshape(-1).contiguous().view(torch.uint8)))


def storage_data_offsets(path) -> dict[str, int]:
    """Zip member name -> offset of its data in the file, for torch's storage records."""
    offsets = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            if "/data/" not in info.filename or info.filename.endswith("serialization_id"):
                continue
            f.seek(info.header_offset)
            header = f.read(30)
            assert header[:4] == b"PK\x03\x04"
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            offsets[info.filename] = info.header_offset + 30 + name_len + extra_len
    return offsets


def _same_file(fields: list[bytes], st: os.stat_result) -> bool:
    major, minor = (int(x, 16) for x in fields[3].split(b":"))
    return (int(fields[4]) == st.st_ino
            and (major, minor) == (os.major(st.st_dev), os.minor(st.st_dev)))


def file_mappings(path) -> list[tuple[int, int]]:
    """Address ranges of `path`'s mappings in this process, from /proc/self/maps."""
    st = os.stat(path)
    found = []
    with open("/proc/self/maps", "rb") as maps:
        for line in maps:
            fields = line.split(None, 5)
            if len(fields) >= 5 and _same_file(fields, st):
                start, end = (int(x, 16) for x in fields[0].split(b"-"))
                found.append((start, end))
    return found


def smaps_rss(path) -> int:
    """Ground truth: the summed smaps `Rss` (bytes) of `path`'s mappings in this process."""
    st = os.stat(path)
    total = 0
    current = False
    with open("/proc/self/smaps", "rb") as smaps:
        for line in smaps:
            fields = line.split(None, 5)
            if fields and b"-" in fields[0] and not fields[0].endswith(b":"):
                current = len(fields) >= 5 and _same_file(fields, st)
            elif current and fields and fields[0] == b"Rss:":
                total += int(fields[1]) * 1024
    return total


def spans_by_name(exporter) -> dict:
    out = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def one_span(exporter, name):
    spans = spans_by_name(exporter).get(name, [])
    assert len(spans) == 1, f"expected one {name!r} span, got {len(spans)}"
    return spans[0]

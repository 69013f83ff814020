"""/proc readings used by the children.

`Key: value kB` fields (smaps_rollup, meminfo, status) come from the package's parser
(`yeto_otel.proc.read_kb_fields`). /proc/self/smaps is read whole on purpose: it is the ground
truth for the probe and its read is what the probe's cost is compared with.
"""

from __future__ import annotations

import os
import re
import statistics
import time

from yeto_otel.proc import parse_kb_fields, read_kb_fields

SMAPS = "/proc/self/smaps"


def _kb(path: str, key: bytes) -> int:
    """One `key: N kB` field of a /proc file, in bytes."""
    found = read_kb_fields(path, {key: "value"})
    if "value" not in found:
        raise RuntimeError(f"{key.decode()!r} not in {path}")
    return found["value"]


def anonymous() -> int:
    return _kb("/proc/self/smaps_rollup", b"Anonymous")


def node_anon_pages() -> int:
    return _kb("/proc/meminfo", b"AnonPages")


def vm_rss() -> int:
    return _kb("/proc/self/status", b"VmRSS")


def vm_hwm() -> int:
    return _kb("/proc/self/status", b"VmHWM")


def read_smaps() -> bytes:
    with open(SMAPS, "rb") as f:
        return f.read()


# A mapping's header line: start-end perms offset dev inode [path].
_HEADER = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ (\S+) (\d+)", re.M)


def smaps_rss_of(path: str, text: bytes) -> tuple[int, int]:
    """(summed Rss bytes, number of mappings) of `path`'s mappings in a /proc/self/smaps text.

    smaps holds one record per mapping; the headers are not `Key: value` lines, so a small
    parser of its own picks `path`'s records by device and inode, and each record's `Rss`
    comes from the package's parser."""
    st = os.stat(path)
    dev = (os.major(st.st_dev), os.minor(st.st_dev))
    headers = list(_HEADER.finditer(text))
    rss = count = 0
    for i, m in enumerate(headers):
        major, minor = (int(x, 16) for x in m.group(3).split(b":"))
        if int(m.group(4)) != st.st_ino or (major, minor) != dev:
            continue
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        found, _ = parse_kb_fields(SMAPS, text[m.end():end], {b"Rss": "rss"})
        rss += found.get("rss", 0)
        count += 1
    return rss, count


def vma_count() -> int:
    """Lines of /proc/self/maps: one per mapping."""
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


def median_time(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)

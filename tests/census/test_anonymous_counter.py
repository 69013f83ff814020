"""`yeto.process.memory.anonymous` comes from /proc/self/status `RssAnon` (a counter the kernel
keeps, the same cost at any size). Ground truth is smaps_rollup `Anonymous` (a walk of every
page): the two agree to within a few pages through the three ways a rank's anonymous memory
changes: anonymous growth, copy-on-write writes into a privately mapped file, and shared
anonymous memory (which is shmem: in neither number)."""

from __future__ import annotations

import mmap

import pytest

from yeto_otel.census import ANONYMOUS, CensusReader
from yeto_otel.proc import PAGE_SIZE, read_kb_fields

SIZE = 64 << 20
# Python allocates between the two reads (a few pages at most); a mistake would be SIZE off.
TOLERANCE = 16 * PAGE_SIZE
ROLLUP = {b"Anonymous": "anonymous", b"Private_Dirty": "private_dirty"}
STATUS = {b"RssShmem": "shmem"}


@pytest.fixture
def census():
    reader = CensusReader(allocator=None, node_metrics=False, smaps_budget_percent=0)
    yield lambda: reader.take()[ANONYMOUS.name].value
    reader.close()


def measure(census) -> dict[str, int]:
    """The census's number between two readings of the truth (and what else we watch)."""
    before = read_kb_fields("/proc/self/smaps_rollup", ROLLUP)
    ours = census()
    after = read_kb_fields("/proc/self/smaps_rollup", ROLLUP)
    low, high = sorted((before["anonymous"], after["anonymous"]))
    assert low - TOLERANCE <= ours <= high + TOLERANCE, (ours, before, after)
    return {"census": ours, **after, **read_kb_fields("/proc/self/status", STATUS)}


def touch(mapping: mmap.mmap, value: int = 1) -> None:
    for offset in range(0, len(mapping), PAGE_SIZE):
        mapping[offset] = value


def grew(before: dict[str, int], after: dict[str, int], key: str) -> int:
    return after[key] - before[key]


def test_anonymous_growth(census):
    start = measure(census)
    anon = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    anon.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, one counter event each
    touch(anon)
    end = measure(census)
    assert SIZE - TOLERANCE <= grew(start, end, "census") <= SIZE + TOLERANCE
    assert SIZE - TOLERANCE <= grew(start, end, "anonymous") <= SIZE + TOLERANCE
    anon.close()
    assert grew(start, measure(census), "census") <= TOLERANCE


def test_anonymous_growth_in_huge_pages(census):
    start = measure(census)
    anon = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    anon.madvise(mmap.MADV_HUGEPAGE)  # 2 MiB pages where the machine gives them
    touch(anon)
    assert SIZE - TOLERANCE <= grew(start, measure(census), "census") <= SIZE + TOLERANCE
    anon.close()


def test_copy_on_write_into_a_private_file_mapping(census, tmp_path):
    path = tmp_path / "anchor.bin"
    path.write_bytes(b"\x07" * SIZE)
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), SIZE, flags=mmap.MAP_PRIVATE)
    start = measure(census)
    assert sum(mapped[o] for o in range(0, SIZE, PAGE_SIZE)) == 7 * (SIZE // PAGE_SIZE)
    read_only = measure(census)  # reading maps the page cache: not anonymous
    assert grew(start, read_only, "census") <= TOLERANCE
    touch(mapped, 9)  # each write copies its page: anonymous now
    written = measure(census)
    assert SIZE - TOLERANCE <= grew(start, written, "census") <= SIZE + TOLERANCE
    assert SIZE - TOLERANCE <= grew(start, written, "anonymous") <= SIZE + TOLERANCE
    mapped.close()
    assert path.read_bytes()[:1] == b"\x07"  # the file never changes


def test_shared_anonymous_memory_is_shmem_in_neither(census):
    """`mmap.mmap(-1, n)` is MAP_SHARED: its pages are shmem (RssShmem), counted in neither
    RssAnon nor smaps_rollup Anonymous, but in Private_Dirty while only this process maps
    them."""
    start = measure(census)
    shared = mmap.mmap(-1, SIZE)
    touch(shared)
    end = measure(census)
    assert SIZE - TOLERANCE <= grew(start, end, "shmem") <= SIZE + TOLERANCE
    assert abs(grew(start, end, "census")) <= TOLERANCE
    assert abs(grew(start, end, "anonymous")) <= TOLERANCE
    assert SIZE - TOLERANCE <= grew(start, end, "private_dirty") <= SIZE + TOLERANCE
    shared.close()

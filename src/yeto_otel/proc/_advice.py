"""Telling the kernel how a mapped file will be read: `madvise(2)` over its mappings.

`MADV_WILLNEED` over a range asks for all of its pages at once: on a cold page cache, one
read of the whole range started now instead of one read-around per page fault, and only
that range (the pages are read into the page cache, not mapped: what the reader then
touches is mapped as it faults, without a disk wait). `MADV_RANDOM` turns off the read-around the kernel does on a fault in a file mapping: with it a
cold fault reads (and fault-around can map) only the faulting page or page-cache folio, so a
sparse reader of a large file brings in about what it reads, at the price of one small read
per fault instead of one larger read per neighbourhood. It changes nothing for pages that
are already cached: the kernel still maps whole large folios around a fault.
"""

from __future__ import annotations

import ctypes
import mmap
import os

from ._residency import PAGE_SIZE, FileMapping

__all__ = ["advise_random_access", "advise_will_need", "evict_from_page_cache"]

# Python's mmap module exposes the constants (and madvise only on its own mappings).
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)
_MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", 3)
_libc = None


def _madvise():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # the C library this process runs on
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _libc.madvise.restype = ctypes.c_int
    return _libc.madvise


def _advise(start: int, length: int, advice: int, what: str) -> None:
    if _madvise()(start, length, advice) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"madvise({what}) over {length} bytes: {os.strerror(err)}")


def advise_random_access(mappings: list[FileMapping]) -> None:
    """`madvise(MADV_RANDOM)` over each mapping (page-aligned ranges from /proc/self/maps).
    Raises OSError when the kernel refuses."""
    for mapping in mappings:
        _advise(mapping.start, mapping.size, _MADV_RANDOM, "MADV_RANDOM")


def advise_will_need(address: int, length: int) -> int:
    """`madvise(MADV_WILLNEED)` over the pages that hold [address, address + length) of a
    file mapping; returns the bytes advised (whole pages). Raises OSError when the kernel
    refuses (ENOMEM: the range is not mapped)."""
    if length <= 0:
        return 0
    start = address - address % PAGE_SIZE
    end = -(-(address + length) // PAGE_SIZE) * PAGE_SIZE
    _advise(start, end - start, _MADV_WILLNEED, "MADV_WILLNEED")
    return end - start


def evict_from_page_cache(path) -> None:
    """Drop a file's pages from the page cache (`posix_fadvise(DONTNEED)`), as after a
    reboot or on a busy node, so the next reader reads it from disk; its dirty pages are
    written first, since DONTNEED leaves those behind. Only this file: the rest of the cache,
    unlike with `drop_caches`, stays as it was. Advisory (a no-op on tmpfs); raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)

"""Many separate file mappings: ~N 4 KiB read-only pages of one temp file, each touched, so
the census can be timed in a process with ~N more VMAs (smaps_rollup walks every one)."""

from __future__ import annotations

import ctypes
import mmap
import os
import tempfile

PAGE = mmap.PAGESIZE

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]


def vma_count() -> int:
    """Lines of /proc/self/maps: one per mapping (counted, nothing parsed)."""
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


def make_mappings(n: int) -> list[int]:
    """mmap n single pages (ctypes, so no fd is kept per mapping). Page i maps file page 2*i:
    non-contiguous offsets, so the kernel cannot merge neighbouring mappings into one VMA."""
    if n <= 0:
        return []
    fd, path = tempfile.mkstemp(prefix="census-bench-")
    try:
        os.ftruncate(fd, 2 * n * PAGE)
        os.pwrite(fd, b"x" * PAGE, 0)
        addrs = []
        for i in range(n):
            addr = _libc.mmap(None, PAGE, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 2 * i * PAGE)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap #{i} failed")
            ctypes.string_at(addr, 1)  # touch: one resident page per mapping
            addrs.append(addr)
        return addrs
    finally:
        os.close(fd)
        os.unlink(path)


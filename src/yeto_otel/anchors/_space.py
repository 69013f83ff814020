"""Room on disk for a save: what the filesystem has free, and reserving a file's blocks.

Why reserve: a full disk found half-way through a save leaves a long write failing late (and
where anything is written through a mapping, as an earlier save did, the kernel answers with
SIGBUS, which kills the trainer with no Python exception). Blocks reserved with fallocate(2)
beforehand cannot run out, and the reservation itself fails cleanly (ENOSPC) when they are not
there. tmpfs allocates the pages and gives them back if it cannot
reserve all of them; ext4 keeps what it managed to allocate until the file is removed, which
the caller does before measuring what is free.

fallocate(2) is called directly rather than through os.posix_fallocate: where a filesystem
has no fallocate (NFSv3, many FUSE filesystems), glibc's posix_fallocate falls back to writing
a byte into every block, i.e. it writes the whole size once more over the network. There the
reservation is skipped and the statvfs check before it is the only guard.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os

from ._aligned_save import save_page_aligned

__all__ = ["NO_ROOM", "describe_need", "free_bytes", "reserve", "saved_size"]

# What fallocate or a write answers when the blocks are not there (a full disk, a quota).
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})

_log = logging.getLogger("yeto_otel.anchors")


def _libc_fallocate():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    for symbol in ("fallocate64", "fallocate"):  # fallocate64 takes 64-bit offsets everywhere
        function = getattr(libc, symbol, None)
        if function is not None:
            function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            function.restype = ctypes.c_int
            return function
    return None


_fallocate = _libc_fallocate()


def reserve(fd: int, nbytes: int) -> bool:
    """Allocate `nbytes` of blocks for the file open at `fd` (its size grows to at least
    `nbytes`). True when reserved; False when this filesystem cannot reserve (nothing was
    done); OSError (ENOSPC, EDQUOT, EIO...) when it can but did not."""
    if nbytes <= 0:
        return True
    if _fallocate is None:
        return False
    while _fallocate(fd, 0, 0, nbytes) != 0:
        code = ctypes.get_errno()
        if code == errno.EINTR:  # a signal: its Python handler runs before the next try
            continue
        if code in _UNSUPPORTED:
            return False
        raise OSError(code, os.strerror(code))
    return True


def free_bytes(directory: str) -> int | None:
    """Bytes this process can still allocate on `directory`'s filesystem, or None when the
    filesystem does not say (statvfs fails, or reports no size at all, as some FUSE
    filesystems do). Root may use the blocks ext4 keeps in reserve, so root counts them."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    if stat.f_blocks == 0:
        return None
    blocks = stat.f_bfree if os.geteuid() == 0 else stat.f_bavail
    return blocks * stat.f_frsize


def _amount(nbytes: int) -> str:
    return f"{nbytes} bytes ({nbytes / (1 << 20):.1f} MiB)"


def describe_need(directory: str, file_bytes: int, free: int | None) -> str:
    """One sentence: the bytes a save needs on `directory`'s filesystem, and those free."""
    need = _amount(file_bytes)
    have = "the filesystem does not say how many are free" if free is None else \
        f"{_amount(free)} free"
    return f"not enough space in {directory}: the save needs {need}; {have}"


class _LengthOnly:
    """A file that keeps only its length: what torch.save writes into it is counted, not kept."""

    def __init__(self):
        self.position = self.length = 0

    def write(self, data) -> int:
        written = memoryview(data).nbytes
        self.position += written
        self.length = max(self.length, self.position)
        return written

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.position, os.SEEK_END: self.length}[whence]
        self.position = base + offset
        self.length = max(self.length, self.position)
        return self.position

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass


def saved_size(content, storage_bytes: int) -> int:
    """The exact size of the anchor file for `content` (laid out by `save_page_aligned`),
    measured by a save that skips the storages' bytes (torch.serialization.skip_data): the
    layout is the same and nothing is read or written, so it costs the pickling only. If this
    torch cannot measure, `storage_bytes` (a lower bound: the file holds the storages)."""
    from torch.serialization import skip_data

    sink = _LengthOnly()
    try:
        with skip_data():
            save_page_aligned(content, sink)
    except Exception as exc:  # a prototype API in torch: never let it stop the save
        _log.debug("cannot measure the anchor file before writing it (%s: %s); reserving the "
                   "storages' %d bytes only", type(exc).__name__, exc, storage_bytes)
        return storage_bytes
    return sink.length

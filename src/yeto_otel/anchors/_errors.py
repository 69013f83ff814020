"""The exception types for anchor files that cannot be used or cannot be written."""

from __future__ import annotations

import errno as _errno
import os

__all__ = ["AnchorLoadError", "AnchorSaveError"]


class AnchorLoadError(Exception):
    """An anchor file could not be loaded. Names the file and the cause; nothing was kept."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"cannot load resume anchors from {self.path}: {reason}")


class AnchorSaveError(OSError):
    """An anchor file could not be written (no space, a quota, an I/O error). Names the file and
    the cause; for a lack of space, the bytes needed and free (`needed`, `free`, or None where
    unknown). Nothing was left behind: no temp file, and the previous file (if any)
    is unchanged. An OSError, so `except OSError` around a checkpoint save catches it; `errno`
    is the cause's (ENOSPC when there is not room)."""

    def __init__(self, path: str | os.PathLike, reason: str, *, code: int = _errno.ENOSPC,
                 needed: int | None = None, free: int | None = None):
        self.path = os.fspath(path)
        self.reason = reason
        self.needed = needed
        self.free = free
        super().__init__(code, f"cannot save resume anchors to {self.path}: {reason}")

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):
        # OSError pickles as (errno, strerror); rebuild from what __init__ takes instead, so the
        # error survives being sent between processes.
        return (_rebuild, (self.path, self.reason, self.errno, self.needed, self.free))


def _rebuild(path, reason, code, needed, free) -> AnchorSaveError:
    return AnchorSaveError(path, reason, code=code, needed=needed, free=free)

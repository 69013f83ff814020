"""The scratch copy a save is written from: one flat tensor per dtype, each a shared mapping of
an unlinked file in the target directory.

Copying the anchors into it fills the page cache (reclaimable), not anonymous memory, which is
what a trainer saving tens of GiB of anchors can least afford. Its price is disk space: the
scratch holds the anchors' bytes once more until the save ends, so a save needs about twice
the file's size free.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field

from ._space import reserve

__all__ = ["Scratch", "scratch_bytes", "scratch_storages"]


@dataclass
class Scratch:
    """The flat storages (dtype name -> 1-D tensor) and the files behind them, open until the
    save ends; `nbytes` in all."""

    storages: dict = field(default_factory=dict)
    fds: list[int] = field(default_factory=list)
    nbytes: int = 0

    def reserve(self) -> None:
        """Allocate every block of the scratch now, so that copying into the mapping can never
        meet a full disk (which would be SIGBUS, not an exception). OSError when not there."""
        for fd, flat in zip(self.fds, self.storages.values()):
            reserve(fd, flat.numel() * flat.element_size())


def _element_size(dtype: str) -> int:
    import torch

    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def scratch_bytes(totals: dict[str, int]) -> int:
    return sum(elements * _element_size(dtype) for dtype, elements in totals.items())


@contextlib.contextmanager
def scratch_storages(totals: dict[str, int], directory: str):
    """A Scratch for `totals` (dtype name -> elements) in `directory`. No block is allocated
    on disk until `reserve()`; nothing is left on disk afterwards, whatever happens."""
    import torch

    scratch = Scratch(nbytes=scratch_bytes(totals))
    try:
        for dtype, elements in totals.items():
            fd, path = tempfile.mkstemp(prefix=".yeto-anchors-", suffix=".scratch",
                                        dir=directory)
            scratch.fds.append(fd)
            try:
                # At its full size already, the file is mapped as it is; shorter, from_file
                # would stretch it by writing a byte at its end, which takes a block (and on a
                # full disk fails as a RuntimeError that only its text says is ENOSPC).
                os.ftruncate(fd, elements * _element_size(dtype))
                scratch.storages[dtype] = torch.from_file(path, shared=True, size=elements,
                                                          dtype=getattr(torch, dtype))
            finally:
                os.unlink(path)  # the mapping and the fd keep the file until the save ends
        yield scratch
    finally:
        scratch.storages.clear()
        for fd in scratch.fds:
            os.close(fd)

"""`save_resume_anchors`: an atomic, page-aligned anchor file with its dtype recorded."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Mapping

from ..proc import read_raw_field
from ..settings import load_settings, parse_setting
from ._file_format import NAME_SEPARATOR, PAGE_BYTES, dtype_name, flat_layout, payload

__all__ = ["save_resume_anchors"]

_log = logging.getLogger("yeto_otel.anchors")


def _resolve_dtype(dtype):
    """A floating torch.dtype, or None for "each tensor's own"."""
    import torch

    if dtype is None:
        return None
    if isinstance(dtype, str):
        return getattr(torch, parse_setting("YETO_DILOCO_ANCHOR_DTYPE", dtype))
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype or its name, got {dtype!r}")
    return dtype


@contextlib.contextmanager
def _page_aligned_storages():
    from torch.utils.serialization import config

    previous = config.save.storage_alignment
    config.save.storage_alignment = PAGE_BYTES
    try:
        yield
    finally:
        config.save.storage_alignment = previous


def _checked(name, tensor, dtype):
    import torch

    if not isinstance(name, str):
        raise TypeError(f"anchor names must be str, got {name!r}")
    if NAME_SEPARATOR in name:
        raise ValueError(f"anchor name {name!r} contains a NUL character")
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"anchor {name!r}: expected a tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        # Anchors are the floating-point weights an island pushed from; an integer tensor here
        # is a caller's mistake, and a dtype conversion would silently hide it.
        raise TypeError(f"anchor {name!r}: anchors must be floating-point tensors, got "
                        f"{tensor.dtype}")
    # Only the layout needs the target dtype: a meta tensor describes it without copying.
    return torch.empty(tensor.shape, dtype=dtype or tensor.dtype, device="meta")


@contextlib.contextmanager
def _flat_storages(totals: dict[str, int], directory: str):
    """One flat tensor per dtype, backed by an unlinked scratch file in `directory`: copying
    the anchors into it fills the page cache (reclaimable), not anonymous memory, which is
    what a trainer saving tens of GiB of anchors can least afford."""
    import torch

    storages = {}
    try:
        for dtype, elements in totals.items():
            fd, scratch = tempfile.mkstemp(prefix=".yeto-anchors-", suffix=".scratch",
                                           dir=directory)
            os.close(fd)
            try:
                storages[dtype] = torch.from_file(scratch, shared=True, size=elements,
                                                  dtype=getattr(torch, dtype))
            finally:
                os.unlink(scratch)  # the mapping keeps the pages until the tensor is freed
        yield storages
    finally:
        storages.clear()


def save_resume_anchors(path: str | os.PathLike, tensors: Mapping[str, object], *,
                        dtype=None) -> None:
    """Write `tensors` (name -> tensor) as the anchor file at `path`.

    Anchor dtype: `dtype` (a torch.dtype or its name), else YETO_DILOCO_ANCHOR_DTYPE, else
    each tensor's own. The file appears under `path` only once complete (temp file in the
    same directory, fsync, rename), so a crash mid-save leaves the previous file, or none.
    """
    if not isinstance(tensors, Mapping):
        raise TypeError("tensors must be a mapping of name -> tensor, got "
                        f"{type(tensors).__name__}")
    import torch

    if dtype is None:
        dtype = load_settings().anchor_dtype  # YETO_DILOCO_ANCHOR_DTYPE, validated there
    target_dtype = _resolve_dtype(dtype)
    shapes = {name: _checked(name, tensor, target_dtype) for name, tensor in tensors.items()}
    layout = flat_layout(shapes)
    recorded = ("mixed" if len(layout.totals) > 1 else next(iter(layout.totals), None)) or \
        dtype_name(target_dtype or torch.get_default_dtype())

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file a normal mode
        with os.fdopen(fd, "wb") as f, _flat_storages(layout.totals, directory) as storages:
            for source, dtype_, offset in zip(tensors.values(), layout.dtypes, layout.offsets):
                source = source.detach()
                storages[dtype_].narrow(0, offset, source.numel()).copy_(source.reshape(-1))
            with _page_aligned_storages():
                torch.save(payload(shapes, layout, storages, recorded), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _umask() -> int:
    # Read, not set-and-restore: os.umask() would change it for every thread for a moment.
    raw = read_raw_field("/proc/self/status", b"Umask")
    try:
        return int(raw, 8) if raw is not None else 0o022
    except ValueError:
        return 0o022


def _fsync_directory(directory: str) -> None:
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        _log.debug("fsync of %s failed: %s", directory, exc)
    finally:
        os.close(dir_fd)

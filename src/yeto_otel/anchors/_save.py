"""`save_resume_anchors`: an atomic, page-aligned anchor file with its dtype recorded."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import dataclass

from ..proc import read_raw_field
from ..settings import current_settings, parse_setting
from ._aligned_save import save_page_aligned
from ._errors import AnchorSaveError
from ._file_format import NAME_SEPARATOR, Layout, dtype_name, flat_layout, payload
from ._fill import fill_storages, placeholder_storages, storage_bytes
from ._space import NO_ROOM, describe_need, free_bytes, reserve, saved_size

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


def save_resume_anchors(path: str | os.PathLike, tensors: Mapping[str, object], *,
                        dtype=None) -> None:
    """Write `tensors` (name -> tensor) as the anchor file at `path`.

    Anchor dtype: `dtype` (a torch.dtype or its name), else YETO_DILOCO_ANCHOR_DTYPE, else
    each tensor's own. The file appears under `path` only once complete (temp file in the
    same directory, fsync, rename), so a crash mid-save leaves the previous file, or none.
    The save needs the file's size free in that directory and reserves it before writing.
    AnchorSaveError (an OSError) when there is not room or the disk fails, naming the bytes
    needed and free; whatever fails, no temp file is left behind.
    """
    if not isinstance(tensors, Mapping):
        raise TypeError("tensors must be a mapping of name -> tensor, got "
                        f"{type(tensors).__name__}")
    import torch

    if dtype is None:
        dtype = current_settings().anchor_dtype  # YETO_DILOCO_ANCHOR_DTYPE, validated there
    target_dtype = _resolve_dtype(dtype)
    shapes = {name: _checked(name, tensor, target_dtype) for name, tensor in tensors.items()}
    layout = flat_layout(shapes)
    recorded = ("mixed" if len(layout.totals) > 1 else next(iter(layout.totals), None)) or \
        dtype_name(target_dtype or torch.get_default_dtype())

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    need = _Need(file_bytes=storage_bytes(layout.totals))  # the file: at least its storages
    try:
        _save(path, directory, tensors, _Plan(shapes, layout, recorded), need)
    except (OSError, RuntimeError) as exc:
        interruption = _interruption_in(exc)
        if interruption is not None:
            raise interruption from None
        code = _os_error_code(exc)
        if code is None or (code not in NO_ROOM and isinstance(exc, OSError)):
            raise  # not about room, and already an OSError that names its file: as it is
        # Let the traceback's frames (ours, torch's) go before measuring what is free: nothing
        # of this save should still be held then (the temp file is already gone).
        for link in _chain(exc):
            traceback.clear_frames(link.__traceback__)
        raise _save_error(path, directory, need, code, exc) from exc
    _fsync_directory(directory)


@dataclass
class _Plan:
    shapes: dict
    layout: Layout
    recorded: str


@dataclass
class _Need:
    """Bytes the save needs, filled in as they become known (for the error message)."""

    file_bytes: int = 0


def _save(path: str, directory: str, tensors: Mapping, plan: _Plan, need: _Need) -> None:
    content = payload(plan.shapes, plan.layout, placeholder_storages(plan.layout.totals),
                      plan.recorded)
    need.file_bytes = saved_size(content, need.file_bytes)
    free = free_bytes(directory)
    if free is not None and free < need.file_bytes:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # before writing anything
    _write_file(path, directory, need.file_bytes, content,
                fill=lambda fd, tmp: fill_storages(fd, tmp, content, tensors, plan.layout))


def _write_file(path: str, directory: str, file_bytes: int, content, *, fill) -> None:
    """Reserve the temp file, lay `content` out in it (torch.save without the storages'
    bytes, each storage on a page), `fill` in those bytes, fsync, then rename it over `path`."""
    from torch.serialization import skip_data  # thread-local in torch, as its page layout

    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; give a normal mode
            reserve(f.fileno(), file_bytes)
            with skip_data():
                save_page_aligned(content, f)
            f.truncate()  # at the end written: the reservation may have been larger
            f.flush()
            fill(f.fileno(), tmp)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:  # a hand-made chain may loop
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _interruption_in(exc: BaseException) -> BaseException | None:
    """A KeyboardInterrupt or SystemExit behind `exc`: torch's zip writer turns one raised while
    it writes (a Ctrl-C mid-save) into a RuntimeError, which must not hide it."""
    return next((e for e in _chain(exc) if not isinstance(e, Exception)), None)


def _os_error_code(exc: BaseException) -> int | None:
    """The errno behind `exc`: its own, or that of an OSError torch turned into a RuntimeError
    (torch's zip writer reports a failed write as "[enforce fail at inline_container.cc...]
    unexpected pos", chained to the OSError when there was one). None when it is no I/O error."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and seen.errno is not None:
            return seen.errno
    if isinstance(exc, RuntimeError) and "inline_container" in str(exc):
        return errno.EIO
    return None


def _save_error(path: str, directory: str, need: _Need, code: int,
                exc: BaseException) -> AnchorSaveError:
    free = free_bytes(directory)
    needed = need.file_bytes
    short = free is not None and free < needed
    if code == errno.EIO and short:
        code = errno.ENOSPC  # torch's short write on a full disk, with no OSError to say so
    if code not in NO_ROOM:
        reason = f"{os.strerror(code)} ({_first_line(exc)})"
    elif free is not None and not short:
        reason = (f"{os.strerror(code)} in {directory}, though statvfs says {free} bytes are "
                  f"free and the save needs {needed} (the rest is taken by the filesystem's own "
                  "metadata, a quota, inodes or blocks kept in reserve)")
    else:
        reason = describe_need(directory, need.file_bytes, free)
    return AnchorSaveError(path, reason, code=code, needed=needed or None, free=free)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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

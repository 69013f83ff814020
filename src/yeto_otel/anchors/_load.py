"""Choosing how to load an anchor file, and loading it: mapped, eager, or eager as a fallback.

The mode is decided from the file's first bytes before torch sees it: a zip checkpoint can be
mapped; a legacy (pickle) checkpoint cannot (torch.load(mmap=True) raises on it), so it is read
eagerly with a warning rather than lost; anything else is refused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import zipfile

from ._errors import AnchorLoadError
from ._file_format import ZIP_MAGIC, tensors_of

__all__ = ["EAGER", "EAGER_FALLBACK", "MMAP", "choose_mode", "load_tensors"]

_log = logging.getLogger("yeto_otel.anchors")

MMAP = "mmap"
EAGER = "eager"
EAGER_FALLBACK = "eager_fallback"
_PICKLE_PROTO = b"\x80"  # torch's legacy format starts with a protocol-2+ pickle


def choose_mode(path: str, *, mmap_enabled: bool) -> tuple[str, int]:
    """(mode, file size) for `path`, or AnchorLoadError when it cannot be an anchor file."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(len(ZIP_MAGIC))
    except FileNotFoundError:
        raise AnchorLoadError(path, "no such file") from None
    except IsADirectoryError:
        raise AnchorLoadError(path, "is a directory") from None
    except OSError as exc:
        raise AnchorLoadError(path, exc.strerror or str(exc)) from None
    if not head:
        raise AnchorLoadError(path, "the file is empty")
    if head.startswith(ZIP_MAGIC):
        if not zipfile.is_zipfile(path):
            raise AnchorLoadError(path, "truncated or corrupt zip archive (no central directory)")
        return (MMAP if mmap_enabled else EAGER), size
    if head.startswith(_PICKLE_PROTO):
        if mmap_enabled:
            _log.warning("resume anchors %s are in torch's legacy (non-zip) format, which cannot "
                         "be mapped: reading all %d bytes eagerly into anonymous memory. Re-save "
                         "them with save_resume_anchors to map them.", path, size)
            return EAGER_FALLBACK, size
        return EAGER, size
    raise AnchorLoadError(path, f"not a torch checkpoint (starts with {head!r}, expected a zip "
                                "archive or a legacy torch pickle)")


def load_tensors(path: str, mode: str) -> tuple[dict, str | None]:
    """torch.load with weights_only=True (never runs code from the file); every failure
    becomes AnchorLoadError and no tensors are returned."""
    import torch

    try:
        with _torch_path(path) as torch_path:
            content = torch.load(torch_path, mmap=(mode == MMAP), weights_only=True,
                                 map_location="cpu")
    except pickle.UnpicklingError as exc:
        raise AnchorLoadError(path, "refused: the file's pickle would run code or build "
                                    f"objects other than tensors (weights_only): "
                                    f"{_first_line(exc)}") from exc
    except Exception as exc:  # torch raises RuntimeError, EOFError, ValueError, zip errors...
        raise AnchorLoadError(path, f"{type(exc).__name__}: {_first_line(exc)}") from exc
    return tensors_of(content, path)


@contextlib.contextmanager
def _torch_path(path: str):
    """The path to give torch.load. torch hands any name ending in .safetensors to the
    safetensors reader; an anchor file so named is reached through its descriptor instead."""
    if not path.endswith(".safetensors"):
        yield path
        return
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

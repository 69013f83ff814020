"""What an anchor file holds.

A zip-format torch checkpoint of one dict:
    {"yeto.resume_anchors": 1, "dtype": "float32", "tensors": {name: tensor, ...}}
Storages are aligned to pages, so each tensor starts on a page of its own and the pages a
resume touches are exactly the pages of the tensors it reads (no neighbour pulled in by a
shared edge page). Plain `{name: tensor}` checkpoints written by other tools load too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .errors import AnchorLoadError

__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "ZIP_MAGIC", "payload", "tensors_of"]

FORMAT_KEY = "yeto.resume_anchors"
FORMAT_VERSION = 1
ZIP_MAGIC = b"PK\x03\x04"


def payload(tensors: dict, dtype_name: str) -> dict:
    return {FORMAT_KEY: FORMAT_VERSION, "dtype": dtype_name, "tensors": tensors}


def tensors_of(content: object, path: str | os.PathLike) -> tuple[dict, str | None]:
    """(name -> tensor, recorded dtype name or None), or AnchorLoadError naming what is wrong."""
    import torch

    recorded = None
    if isinstance(content, Mapping) and FORMAT_KEY in content:
        version = content.get(FORMAT_KEY)
        if version != FORMAT_VERSION:
            raise AnchorLoadError(path, f"anchor format version {version!r} is not supported "
                                        f"(this version reads {FORMAT_VERSION})")
        recorded = content.get("dtype")
        content = content.get("tensors")
    if not isinstance(content, Mapping):
        raise AnchorLoadError(path, f"content is {type(content).__name__}, expected a mapping "
                                    "of name -> tensor")
    for name, value in content.items():
        if not isinstance(name, str):
            raise AnchorLoadError(path, f"key {name!r} is not a name (str)")
        if not isinstance(value, torch.Tensor):
            raise AnchorLoadError(path, f"{name!r} holds {type(value).__name__}, expected a "
                                        "tensor")
    return dict(content), recorded if isinstance(recorded, str) else None

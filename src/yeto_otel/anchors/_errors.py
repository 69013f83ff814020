"""The one exception type for anchor files that cannot be used."""

from __future__ import annotations

import os

__all__ = ["AnchorLoadError"]


class AnchorLoadError(Exception):
    """An anchor file could not be loaded. Names the file and the cause; nothing was kept."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = os.fspath(path)
        self.reason = reason
        super().__init__(f"cannot load resume anchors from {self.path}: {reason}")

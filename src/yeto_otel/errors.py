"""Errors the command line shows as one message (no traceback)."""

from __future__ import annotations

__all__ = ["UserFacingError"]


class UserFacingError(Exception):
    """Bad input from the user (a directory, a file, a flag): `yeto-otel` prints it and exits 2."""

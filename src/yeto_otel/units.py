"""Byte counts as people read them (binary units), for the CLI, the demo and the report."""

from __future__ import annotations

__all__ = ["format_bytes"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(n: float, decimals: int = 1) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB; negative values keep their sign."""
    sign = "-" if n < 0 else ""
    value = float(abs(n))
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            digits = 0 if unit == "B" else decimals
            return f"{sign}{value:,.{digits}f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")

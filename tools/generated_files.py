"""Files generated from code (docs, dashboards, rule tests): write them, or check they are
current. One behaviour for every generator, so `--check` means the same everywhere."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["sync_generated"]


def sync_generated(files: Mapping[Path, str], *, check: bool, regenerate: str) -> int:
    """Write each file's text (creating folders), or with `check` write nothing and return 1,
    naming on stderr each file that is missing or differs and the `regenerate` command."""
    if check:
        stale = [path for path, text in files.items()
                 if not path.is_file() or path.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path} is out of date", file=sys.stderr)
        if stale:
            print(f"regenerate with: {regenerate}", file=sys.stderr)
            return 1
        return 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0

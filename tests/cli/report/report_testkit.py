"""Shared by the report tests: running `yeto-otel report` and requiring plotly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def plotly_or_skip() -> None:
    try:
        import plotly  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("plotly is not installed: pip install 'plotly>=6'")


def report(*args: str | os.PathLike) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}
    return subprocess.run([sys.executable, "-m", "yeto_otel.cli", "report", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)

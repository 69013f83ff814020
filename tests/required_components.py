"""What tests need from outside Python (the collector, Jaeger, Prometheus, promtool, ...), and
the one rule for when it is missing: outside CI the test is skipped with the command that
provides it; with CI=true it fails, so CI can never silently skip a suite."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR_DIR = ROOT / "collector"
IN_CI = os.environ.get("CI") == "true"


def missing(what: str, how: str):
    """Skip (or, in CI, fail) the calling test: `what` is not available; `how` gets it."""
    message = f"{what} is not available; get it with `{how}`"
    if IN_CI:
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


def executable(env_name: str, default: Path | str) -> str | None:
    """The program named by $env_name (else `default`), as a path, if it can be run."""
    value = os.environ.get(env_name) or str(default)
    path = shutil.which(value) or value
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def stack_module():
    """collector/stack.py (not a package), imported once by path."""
    name = "yeto_collector_stack"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, COLLECTOR_DIR / "stack.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses needs the module registered
        spec.loader.exec_module(module)
    return sys.modules[name]

"""Fixtures for the Prometheus rule tests (collector/alerts).

promtool comes from YETO_PROMTOOL_BIN or PATH. Missing: skipped with the command that provides
it; with CI=true the tests fail instead, so CI can never silently skip the rule tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

from required_components import missing


@pytest.fixture(scope="session")
def promtool_bin() -> str:
    value = os.environ.get("YETO_PROMTOOL_BIN") or "promtool"
    path = shutil.which(value)
    if path is None and os.path.isfile(value) and os.access(value, os.X_OK):
        path = value
    if path is None:
        missing(f"promtool (YETO_PROMTOOL_BIN or PATH: {value!r})", "apt-get install prometheus")
    return path

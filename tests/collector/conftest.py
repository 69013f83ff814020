"""Fixtures for the Prometheus rule tests (collector/alerts) and the dashboard tests
(collector/dashboards).

promtool comes from YETO_PROMTOOL_BIN or PATH. Missing: skipped with the command that provides
it; with CI=true the tests fail instead, so CI can never silently skip the rule tests. The same
holds for the Grafana foundation SDK, which the dashboard generator needs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import pytest

from dashboard_testkit import DASHBOARD_DIR, GENERATOR, UIDS, load
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


@pytest.fixture(scope="module")
def generator():
    """collector/dashboards/generate.py as a module."""
    if importlib.util.find_spec("grafana_foundation_sdk") is None:
        missing("the Grafana foundation SDK", 'pip install -e ".[dashboards]"')
    return load(GENERATOR, "yeto_dashboard_generator")


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    """The committed dashboards' JSON, by file name."""
    return {name: json.loads((DASHBOARD_DIR / name).read_text(encoding="utf-8")) for name in UIDS}


@pytest.fixture(scope="module")
def island(dashboards) -> dict:
    return dashboards["island-restart.json"]


@pytest.fixture(scope="module")
def census(dashboards) -> dict:
    return dashboards["host-memory-census.json"]

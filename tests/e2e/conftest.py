"""Fixtures for the end-to-end tests against the real collector, Jaeger and Prometheus.

Missing components: skipped outside CI (with the command that provides them); with CI=true the
tests fail instead, so CI can never silently skip the e2e suite.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR_DIR = ROOT / "collector"
IN_CI = os.environ.get("CI") == "true"


def _load_stack_module():
    spec = importlib.util.spec_from_file_location("yeto_collector_stack", COLLECTOR_DIR / "stack.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses needs the module registered
    spec.loader.exec_module(module)
    return module


stack_module = _load_stack_module()


def missing(what: str, how: str):
    message = f"{what} is not available; get it with `{how}`"
    if IN_CI:
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


def _executable(env_name: str, default: Path | str) -> str | None:
    value = os.environ.get(env_name) or str(default)
    path = shutil.which(value) or value
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@pytest.fixture(scope="session")
def otelcol_bin() -> str:
    path = _executable("YETO_OTELCOL_BIN", COLLECTOR_DIR / "build" / "yeto-otelcol")
    if path is None:
        missing("the collector distribution (collector/build/yeto-otelcol)", "collector/build.sh")
    return path


@pytest.fixture(scope="session")
def jaeger_bin() -> str:
    path = _executable("YETO_JAEGER_BIN", COLLECTOR_DIR / "jaeger" / "bin" / "jaeger")
    if path is None:
        missing("Jaeger (collector/jaeger/bin/jaeger)", "collector/build-jaeger.sh")
    return path


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    path = _executable("YETO_PROMETHEUS_BIN", "prometheus")
    if path is None:
        missing("Prometheus", "apt-get install prometheus")
    return path


@pytest.fixture(scope="session")
def instrument_bin() -> str:
    path = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    if path is None:
        missing("opentelemetry-instrument (beside this python)", 'pip install -e ".[test]"')
    return path


@pytest.fixture(scope="module")
def stack(otelcol_bin, jaeger_bin, prometheus_bin, tmp_path_factory):
    """Jaeger + Prometheus + the agent on free loopback ports, one stack per test module."""
    workdir = tmp_path_factory.mktemp("stack")
    st = stack_module.Stack(workdir, agent_env={"YETO_AGENT_LOG_LEVEL": "info"})
    st.start()
    try:
        yield st
    finally:
        st.close()

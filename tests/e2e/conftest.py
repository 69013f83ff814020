"""Fixtures for the end-to-end tests against the real collector, Jaeger and Prometheus.

Missing components: skipped outside CI (with the command that provides them); with CI=true the
tests fail instead, so CI can never silently skip the e2e suite.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

import required_components
from required_components import COLLECTOR_DIR, executable, missing

stack_module = required_components.stack_module()


@pytest.fixture(scope="session")
def otelcol_bin() -> str:
    path = executable("YETO_OTELCOL_BIN", COLLECTOR_DIR / "build" / "yeto-otelcol")
    if path is None:
        missing("the collector distribution (collector/build/yeto-otelcol)", "collector/build.sh")
    return path


@pytest.fixture(scope="session")
def jaeger_bin() -> str:
    path = executable("YETO_JAEGER_BIN", COLLECTOR_DIR / "jaeger" / "bin" / "jaeger")
    if path is None:
        missing("Jaeger (collector/jaeger/bin/jaeger)", "collector/build-jaeger.sh")
    return path


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    path = executable("YETO_PROMETHEUS_BIN", "prometheus")
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

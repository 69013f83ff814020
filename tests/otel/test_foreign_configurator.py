"""With the real opentelemetry-distro installed beside yeto-otel (what opentelemetry-bootstrap
images ship), a rank still gets yeto-otel's configuration, or says loudly why not.

`opentelemetry-instrument` loads the first distro and the first configurator it finds. The
tests put opentelemetry-distro (the release that matches the installed instrumentation) on
PYTHONPATH, so that it is found first, and, for the other order, a copy of yeto-otel's
metadata ahead of it."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys

import pytest

from zero_code import console_exports, run_instrumented

RANK_CODE = """
import os, tempfile, torch
path = os.path.join(tempfile.mkdtemp(), "resume.pt")
torch.save({"w": torch.ones(4)}, path)
torch.load(path)
print("trainer ran")
"""
CONSOLE = {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "console",
           "OTEL_LOGS_EXPORTER": "none"}


@pytest.fixture(scope="module")
def other_distro(tmp_path_factory) -> str:
    """A directory holding the real opentelemetry-distro of the installed instrumentation's
    release (from the package index, as `opentelemetry-bootstrap` would install it)."""
    version = importlib.metadata.version("opentelemetry-instrumentation")
    target = tmp_path_factory.mktemp("opentelemetry-distro")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), f"opentelemetry-distro=={version}"], check=True, timeout=600)
    return str(target)


@pytest.fixture(scope="module")
def yeto_first(tmp_path_factory) -> str:
    """A directory holding a copy of yeto-otel's metadata: listed ahead of another
    distribution, its distro and configurator are the ones found first."""
    source = importlib.metadata.distribution("yeto-otel")._path  # the .dist-info directory
    target = tmp_path_factory.mktemp("yeto-first")
    shutil.copytree(source, target / source.name)
    return str(target)


def identities(stdout: str) -> tuple[set, set]:
    """(service.instance.id of the metric batches, of the span batches) the console printed."""
    metrics, spans = set(), set()
    for doc in console_exports(stdout):
        for rm in doc.get("resource_metrics", []):
            if any(sm["metrics"] for sm in rm["scope_metrics"]):
                metrics.add(rm["resource"]["attributes"].get("service.instance.id"))
        if "resource" in doc and "name" in doc:  # one span per document
            spans.add((doc["name"], doc["resource"]["attributes"].get("service.instance.id")))
    return metrics, spans


def run_rank(path: str, **env: str):
    result = run_instrumented(RANK_CODE, {"RANK": "0", "WORLD_SIZE": "1", "PYTHONPATH": path,
                                          "OTEL_SERVICE_NAME": "trainer", **CONSOLE, **env},
                              console=False)
    assert result.returncode == 0 and "trainer ran" in result.stdout, result.stderr
    return result


def test_when_the_other_configurator_wins_the_rank_says_so_and_keeps_its_identity(
        other_distro):
    result = run_rank(other_distro)
    warning = [line for line in result.stderr.splitlines() if line.startswith("yeto-otel:")]
    assert len(warning) == 1
    assert "'configurator' of opentelemetry-distro" in warning[0]
    assert "OTEL_PYTHON_DISTRO=yeto and OTEL_PYTHON_CONFIGURATOR=yeto" in warning[0]
    metrics, spans = identities(result.stdout)
    rank = [i for i in metrics if i and i.endswith("/rank-0")]
    assert rank and metrics == set(rank)  # the census reports only under the rank's identity
    assert ("torch.load", rank[0]) in spans


def test_when_ours_is_found_first_it_configures_the_rank_without_a_word(other_distro,
                                                                        yeto_first):
    result = run_rank(f"{yeto_first}:{other_distro}")
    assert "yeto-otel:" not in result.stderr
    metrics, spans = identities(result.stdout)
    assert len(metrics) == 1 and next(iter(metrics)).endswith("/rank-0")
    assert ("torch.load", next(iter(metrics))) in spans


def test_the_other_distro_with_our_configurator_still_decides_the_role_first(other_distro,
                                                                            yeto_first):
    """opentelemetry-distro's distro runs (chosen by name), ours does not: our configurator
    does what our distro would have done first (the role, the settings check)."""
    result = run_instrumented("print('ran')", {
        "RANK": "0", "PYTHONPATH": f"{yeto_first}:{other_distro}", "OTEL_PYTHON_DISTRO":
        "distro", "YETO_OTEL_NODE_METRICS": "sometimes", **CONSOLE}, console=False)
    assert result.returncode == 2 and "ran" not in result.stdout
    assert "YETO_OTEL_NODE_METRICS" in result.stderr


def test_naming_ours_is_the_fix(other_distro):
    result = run_rank(other_distro, OTEL_PYTHON_DISTRO="yeto", OTEL_PYTHON_CONFIGURATOR="yeto")
    assert "yeto-otel:" not in result.stderr
    metrics, _ = identities(result.stdout)
    assert len(metrics) == 1 and next(iter(metrics)).endswith("/rank-0")


def test_a_launcher_set_up_by_the_other_configurator_says_so_and_reports_nothing_of_ours(
        other_distro, tmp_path):
    launcher = tmp_path / "torchrun"
    launcher.write_text(f"#!{sys.executable}\nprint('launcher ran')\n")
    launcher.chmod(0o755)
    result = run_instrumented("", {"PYTHONPATH": other_distro, **CONSOLE}, console=False,
                              command=[str(launcher)])
    assert result.returncode == 0 and "launcher ran" in result.stdout, result.stderr
    assert "this launcher reports nothing of yeto-otel's" in result.stderr
    assert identities(result.stdout)[0] == set()  # no census of ours in the launcher

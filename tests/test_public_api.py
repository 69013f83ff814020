"""The public face: `yeto_otel.__all__`, docs/api.md (every name documented, every example
runs), a cheap `import yeto_otel`, `py.typed`, and the earlier import paths."""

from __future__ import annotations

import importlib.resources
import os
import re
import subprocess
import sys
import textwrap

import pytest

import yeto_otel
from repo_paths import ROOT

API_DOC = ROOT / "docs" / "api.md"
EXAMPLE = re.compile(r"```python\n(.*?)```", re.S)


def documented_names() -> set[str]:
    names = set()
    for heading in re.findall(r"^### (.+)$", API_DOC.read_text(), re.M):
        names |= set(re.findall(r"`([A-Za-z_]\w*)`", heading))
    return names


def examples() -> list[str]:
    return EXAMPLE.findall(API_DOC.read_text())


def clean_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "YETO_")) and k not in ("RANK", "LOCAL_RANK")}
    env["YETO_OTEL_LOCAL_DIR"] = str(tmp_path / "telemetry")
    return env


def test_every_public_name_is_documented_and_nothing_else():
    assert documented_names() == set(yeto_otel.__all__)


def test_every_public_name_resolves():
    for name in yeto_otel.__all__:
        assert getattr(yeto_otel, name) is not None, name
    assert set(yeto_otel.__all__) <= set(dir(yeto_otel))
    with pytest.raises(AttributeError, match="no attribute 'census_snapshot'"):
        yeto_otel.census_snapshot  # noqa: B018


def test_public_names_are_the_rooms_own_objects():
    from yeto_otel.anchors import load_resume_anchors
    from yeto_otel.instrumentation import HostMemoryInstrumentor

    assert yeto_otel.load_resume_anchors is load_resume_anchors
    assert yeto_otel.HostMemoryInstrumentor is HostMemoryInstrumentor


@pytest.mark.parametrize("index", range(len(examples())))
def test_the_api_examples_run(index, tmp_path):
    code = examples()[index]
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=clean_env(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"example {index + 1}:\n{code}\n{result.stderr}"


def test_importing_the_package_loads_neither_torch_nor_the_sdk(tmp_path):
    code = textwrap.dedent("""
        import sys
        import yeto_otel
        heavy = [m for m in ("torch", "opentelemetry.sdk", "opentelemetry") if m in sys.modules]
        print(",".join(heavy))
    """)
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(tmp_path),
                            capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == ""


def test_the_package_ships_its_type_information():
    assert importlib.resources.files("yeto_otel").joinpath("py.typed").is_file()


@pytest.mark.parametrize("old", ["yeto_otel.step_log", "yeto_otel.host_cache",
                                 "yeto_otel.distro", "yeto_otel.setting_table",
                                 "yeto_otel.setting_values"])
def test_the_import_paths_of_earlier_releases_are_gone(old, monkeypatch):
    """0.4 removed them, as 0.3 announced: an old import fails at once, not with a warning."""
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)

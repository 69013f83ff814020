"""Every shipped collector config validates with the distribution, and the distribution has
every component type the configs name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

COLLECTOR_DIR = Path(__file__).resolve().parents[2] / "collector"

CONFIGS = ["agent.yaml", "gateway.yaml", "agent-to-gateway.yaml"]
SECTIONS = ("receivers", "processors", "exporters", "extensions", "connectors")


def top_level_keys(text: str) -> dict[str, list[str]]:
    """{section: [its component ids]} of a collector config or of `components` output (which
    lists each section's components as `- name: <type>`)."""
    sections = {}
    for section, body in (yaml.safe_load(text) or {}).items():
        if isinstance(body, dict):
            sections[section] = list(body)
        elif isinstance(body, list):
            sections[section] = [item["name"] for item in body
                                 if isinstance(item, dict) and "name" in item]
        else:
            sections[section] = []
    return sections


def sample_env(tmp_path) -> dict[str, str]:
    """What a deployment must provide (the variables without defaults), with sample values."""
    cert = tmp_path / "cert.pem"
    key = tmp_path / "key.pem"
    cert.write_text("")
    key.write_text("")
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
            "YETO_GATEWAY_TOKEN": "sample-token",
            "YETO_GATEWAY_TLS_CERT_FILE": str(cert),
            "YETO_GATEWAY_TLS_KEY_FILE": str(key),
            "YETO_GATEWAY_ENDPOINT": "gateway.example:4317",
            "YETO_AGENT_QUEUE_DIR": str(tmp_path / "agent-queue"),
            "YETO_GATEWAY_QUEUE_DIR": str(tmp_path / "gateway-queue")}


def test_collector_configs_are_all_listed():
    found = {p.name for p in COLLECTOR_DIR.glob("*.yaml")
             if "receivers" in top_level_keys(p.read_text()) and "service" in
             top_level_keys(p.read_text()) and p.name != "jaeger.yaml"}
    assert found == set(CONFIGS)


@pytest.mark.parametrize("name", CONFIGS)
def test_config_validates(otelcol_bin, tmp_path, name):
    result = subprocess.run([otelcol_bin, "validate", "--config", str(COLLECTOR_DIR / name)],
                            env=sample_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def _component_types(keys: list[str] | None) -> set[str]:
    return {key.split("/", 1)[0] for key in (keys or ())}


def test_components_lists_every_type_the_configs_name(otelcol_bin):
    result = subprocess.run([otelcol_bin, "components"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    listed = top_level_keys(result.stdout)
    assert listed.get("receivers") and listed.get("exporters"), result.stdout
    for name in CONFIGS:
        config = top_level_keys((COLLECTOR_DIR / name).read_text())
        assert config.get("receivers") and config.get("exporters"), name
        for section in SECTIONS:
            wanted = _component_types(config.get(section))
            have = set(listed.get(section) or ())
            assert wanted <= have, f"{name}: {section} {sorted(wanted - have)} not in the build"


@pytest.mark.parametrize("configs", [["jaeger.yaml"], ["jaeger.yaml", "jaeger-persistent.yaml"]],
                         ids=["memory", "persistent"])
def test_jaeger_configs_validate(jaeger_bin, tmp_path, configs):
    argv = [jaeger_bin, "validate"]
    for name in configs:
        argv += ["--config", str(COLLECTOR_DIR / name)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "YETO_JAEGER_BADGER_DIR": str(tmp_path / "badger")}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr

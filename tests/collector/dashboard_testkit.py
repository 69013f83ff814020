"""What the dashboard tests share: where the dashboards are, the generator's module, and
readers of the dashboards' JSON (panels, variables, queries, overrides)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = ROOT / "collector" / "dashboards"
GENERATOR = DASHBOARD_DIR / "generate.py"
FIX = 'python collector/dashboards/generate.py  (needs: pip install -e ".[dashboards]")'
UIDS = {"island-restart.json": "yeto-island-restart",
        "host-memory-census.json": "yeto-host-memory-census"}


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


names = load(Path(__file__).with_name("test_metric_names.py"), "yeto_dashboard_metric_names")


def panels(dashboard: dict) -> list[dict]:
    """Every panel but rows, including those inside collapsed rows."""
    return [p for p in names.walk_panels(dashboard["panels"]) if p["type"] != "row"]


def variables(dashboard: dict) -> dict[str, dict]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def prometheus_targets(dashboard: dict) -> list[tuple[dict, dict]]:
    return [(panel, target) for panel in panels(dashboard) for target in panel["targets"]
            if panel["datasource"]["type"] == "prometheus"]


def override_values(panel: dict, matcher_id: str, options: str, prop: str):
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        if override["matcher"] == {"id": matcher_id, "options": options}:
            for item in override["properties"]:
                if item["id"] == prop:
                    return item["value"]
    return None


def panel_with(dashboard: dict, metric: str) -> dict:
    found = [p for p in panels(dashboard) for t in p["targets"]
             if metric in names.metric_names(t.get("expr", ""))]
    assert found, f"no panel shows {metric}"
    return found[0]


def panel_metrics(panel: dict) -> set[str]:
    return set().union(*(names.metric_names(t["expr"]) for t in panel["targets"]))

#!/usr/bin/env python3
"""Grafana dashboards for yeto-otel, as code.

    python collector/dashboards/generate.py           # (re)write the JSON files beside this script
    python collector/dashboards/generate.py --check   # exit 1, naming each file that differs

Needs the Grafana foundation SDK: `pip install -e ".[dashboards]"`. Output is deterministic
(sorted keys, two-space indent, trailing newline), so the committed JSON is exactly what this
script writes and a test fails when the two drift apart. docs/dashboards.md describes every
panel.

The dashboards use Grafana's classic JSON model (schemaVersion 42, Grafana 12), the form that
"Import dashboard" and file provisioning take. Every datasource is a template variable, so the
files carry no instance-specific datasource uid.

The modules beside this script: dashboard_names.py (every metric, rule, label, span and
attribute name, taken from the product's tables and the rule files, and the PromQL built from
them), dashboard_kit.py (layout, panels, variables, the frame both dashboards share),
panels_island.py and panels_census.py (one dashboard each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root, for tools/ (not installed)
sys.path.insert(0, str(HERE))  # the panel modules beside this script
from tools.generated_files import sync_generated  # noqa: E402

from dashboard_kit import JSONEncoder  # noqa: E402  (first: imports the SDK quietly)
from panels_census import host_memory_census  # noqa: E402
from panels_island import island_restart  # noqa: E402

REGENERATE = 'python collector/dashboards/generate.py  (needs: pip install -e ".[dashboards]")'

DASHBOARDS = {
    "island-restart.json": island_restart,
    "host-memory-census.json": host_memory_census,
}


def render() -> dict[str, str]:
    """File name -> the exact text of that dashboard's JSON file."""
    encoder = JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False)
    return {name: encoder.encode(build().build()) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file that is missing or differs")
    parser.add_argument("--dir", type=Path, default=HERE,
                        help="folder of the JSON files (default: beside this script)")
    args = parser.parse_args(argv)
    return sync_generated({args.dir / name: text for name, text in render().items()},
                          check=args.check, regenerate=REGENERATE)


if __name__ == "__main__":
    sys.exit(main())

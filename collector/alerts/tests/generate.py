#!/usr/bin/env python3
"""Writes the promtool unit tests of collector/alerts/yeto-memory.yml that need long series.

    python collector/alerts/tests/generate.py          # rewrite the generated *_test.yml here
    python collector/alerts/tests/generate.py --check  # exit 1 when they are out of date

A sawtooth sampled every minute for hours is hundreds of values, one `a+bxn` run per tooth:
too many to write by hand. The scenarios are declared minute by minute in the modules beside
this script (scenarios_node.py, scenarios_rank.py, scenarios_workers.py,
scenarios_exhaustion.py, scenarios_cgroup_oom.py, scenarios_cgroup_memory.py, scenarios_exits.py,
made of
scenario_kit.py's and scenarios_cgroup_kit.py's shapes) and written by promtool_format.py in
promtool's expanding notation
(`a+bxn` is n+1 values, `_xn` is n missing samples, `stale` a staleness marker). The YAML is
committed; a test fails when it differs from what this writes. Standard library only.

Magnitudes are those of a large trainer host: node AnonPages ~400 GiB with a sawtooth of
several GiB between fragment syncs (period 6-10 min), rank anonymous memory ~40 GiB, a leak of
1 MiB/min on the troughs. Samples arrive every minute (the census export / remote-write
period), and the rules are evaluated every minute, like `interval: 1m` in the rule file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root, for tools/ (not installed)
sys.path.insert(0, str(HERE))  # the scenario modules beside this script
from tools.generated_files import sync_generated  # noqa: E402

from promtool_format import render_file  # noqa: E402
from scenarios_cgroup_memory import headroom_cases, pressure_cases  # noqa: E402
from scenarios_cgroup_oom import oom_cases  # noqa: E402
from scenarios_exhaustion import exhaustion_cases  # noqa: E402
from scenarios_exits import exit_cases  # noqa: E402
from scenarios_node import node_cases  # noqa: E402
from scenarios_rank import rank_cases  # noqa: E402
from scenarios_workers import worker_cases  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs")
    args = parser.parse_args(argv)
    files = {
        "node_anon_pages_test.yml": render_file(
            "YetoNodeAnonPagesLeak and the node AnonPages floors.", node_cases()),
        "rank_anonymous_test.yml": render_file(
            "YetoRankAnonymousLeak and the rank anonymous-memory floors.", rank_cases()),
        "dataloader_workers_test.yml": render_file(
            "YetoRankAnonymousLeak and the rank floors beside DataLoader workers.",
            worker_cases()),
        "node_exhaustion_test.yml": render_file(
            "YetoNodeMemoryExhaustion and MemAvailable's floor trend.", exhaustion_cases()),
        "cgroup_oom_kill_test.yml": render_file(
            "YetoCgroupOOMKill and the memory cgroup's event counts.", oom_cases()),
        "cgroup_headroom_test.yml": render_file(
            "YetoCgroupMemoryHeadroom and the cgroup's non-reclaimable memory.",
            headroom_cases()),
        "cgroup_pressure_test.yml": render_file(
            "YetoCgroupMemoryPressure and the cgroup's stall time.", pressure_cases()),
        "rank_exits_test.yml": render_file(
            "YetoRankOOMKilled and the deaths yeto_rank_exits_total reports.", exit_cases()),
    }
    return sync_generated({HERE / name: text for name, text in files.items()},
                          check=args.check,
                          regenerate="python collector/alerts/tests/generate.py")


if __name__ == "__main__":
    sys.exit(main())

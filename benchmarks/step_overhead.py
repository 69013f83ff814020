#!/usr/bin/env python
"""What switching yeto-otel on costs a real training step: bare against `opentelemetry-instrument`
with the defaults and with a 1 s census plus the step log, interleaved, in one run.

Run by hand (not a test):

    python benchmarks/step_overhead.py                       # ~15 min here
    python benchmarks/step_overhead.py --rounds 2 --steps 200 --workloads mlp

Workloads (CPU, gloo, OMP/torch threads 1 per rank, each rank and its DataLoader workers pinned
to a CPU of their own):

* transformer   torchrun, 2 ranks: a 2-layer transformer encoder in DDP, a DataLoader with
                2 workers (`benchmarks/steps/ddp_trainer.py`); tens of milliseconds a step.
* mlp           the same job with a 3-layer MLP: a step of a few milliseconds.
* lightning     PyTorch Lightning's own DDP launcher (`python lightning_trainer.py`, devices=2),
                a few milliseconds a step, as in Lightning's examples.

Variants: `bare` (no yeto-otel); `defaults` (`opentelemetry-instrument` in front, local
files: the census every 10 s); `census 1s + step log` (`OTEL_METRIC_EXPORT_INTERVAL=1000`,
`YETO_DILOCO_HOST_MEM_CENSUS=1`, every step's record through `add_census_to_step_log`; not
for lightning). Each rank reports its start-up (process start to its first step), its median
step time after 30 warm-up steps and its VmRSS at the end. Per round, the variants run one
after another in a rotated order; the figures are medians over rounds of the ranks' mean, and
the ratio or difference against bare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "steps"
VARIANTS = ("bare", "defaults", "census 1s + step log")


def tool(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable))
    if not found:
        raise SystemExit(f"{name} is not installed beside {sys.executable}")
    return found


def command(workload: str, variant: str, steps: int, out: Path) -> list[str]:
    if workload == "lightning":
        job = [sys.executable, str(HERE / "lightning_trainer.py"), str(steps), str(out)]
    else:
        job = [tool("torchrun"), "--standalone", "--nproc_per_node=2",
               str(HERE / "ddp_trainer.py"), workload, str(steps), str(out)]
        if variant == "census 1s + step log":
            job.append("step-log")
    return job if variant == "bare" else [tool("opentelemetry-instrument"), *job]


def environment(variant: str, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               YETO_OTEL_LOCAL_DIR=str(workdir / "telemetry"))
    if variant == "census 1s + step log":
        env.update(OTEL_METRIC_EXPORT_INTERVAL="1000", YETO_DILOCO_HOST_MEM_CENSUS="1")
    return env


def run_once(workload: str, variant: str, steps: int, workdir: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(dir=workdir))
    done = subprocess.run(command(workload, variant, steps, out), env=environment(variant, workdir),
                          capture_output=True, text=True, cwd=workdir)
    ranks = [json.loads(p.read_text()) for p in sorted(out.glob("rank-*.json"))]
    if done.returncode != 0 or len(ranks) != 2:
        raise SystemExit(f"{workload}/{variant} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {key: statistics.mean(r[key] for r in ranks)
            for key in ("median_step_ms", "startup_s", "rss_mib")}


def measure(workload: str, rounds: int, steps: int, workdir: Path) -> dict[str, list[dict]]:
    variants = [v for v in VARIANTS if not (workload == "lightning" and "step log" in v)]
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(rounds):
        for variant in variants[r % len(variants):] + variants[:r % len(variants)]:
            results[variant].append(run_once(workload, variant, steps, workdir))
    return results


def report(workload: str, results: dict[str, list[dict]]) -> None:
    def median(variant: str, key: str) -> float:
        return statistics.median(run[key] for run in results[variant])

    print(f"\n{workload}")
    print(f"{'variant':22} {'step ms':>8} {'x bare':>7} {'(rounds)':>22} {'start-up s':>10} "
          f"{'+s':>6} {'RSS MiB':>8} {'+MiB':>6}")
    for variant in results:
        per_round = ", ".join(f"{a['median_step_ms'] / b['median_step_ms']:.3f}"
                              for a, b in zip(results[variant], results["bare"]))
        print(f"{variant:22} {median(variant, 'median_step_ms'):8.2f} "
              f"{median(variant, 'median_step_ms') / median('bare', 'median_step_ms'):7.3f} "
              f"{per_round:>22} {median(variant, 'startup_s'):10.2f} "
              f"{median(variant, 'startup_s') - median('bare', 'startup_s'):+6.2f} "
              f"{median(variant, 'rss_mib'):8.1f} "
              f"{median(variant, 'rss_mib') - median('bare', 'rss_mib'):+6.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--workloads", default="transformer,mlp,lightning")
    args = parser.parse_args()
    print(f"{args.steps} steps per rank, 2 ranks, {args.rounds} rounds interleaved; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as workdir:
        for workload in args.workloads.split(","):
            report(workload, measure(workload, args.rounds, args.steps, Path(workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

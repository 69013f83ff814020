"""A synthetic stretch of a job's local telemetry: N ranks exporting the census every few
seconds for hours, as the embedded default writes it (one metrics file per rank, one OTLP JSON
batch per line), for the report's scale benchmark and its large-input browser test.

The lines are templated from a real one: `template_batch` runs a short process under
`opentelemetry-instrument` with the project's own local-files writer and takes its last
metrics line. Rank 0 keeps everything it exported (the node and memory cgroup metrics are
observed by one process); the other ranks drop those namespaces, as their duty election would.

Every rank's anonymous memory is a sawtooth (it climbs by `SAW_BYTES` over `SAW_PERIOD`
exports, then drops back), rank 3's floor also leaks `LEAK_PER_PERIOD` per period: what the
page must show apart. `sawtooth` gives the exact values, so a check can look for the peaks and
troughs on the page.
"""

from __future__ import annotations

import calendar
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["LEAKING_RANK", "SAW_BYTES", "SAW_PERIOD", "T0", "anonymous", "sawtooth",
           "template_batch", "write_day"]

T0 = calendar.timegm((2026, 3, 2, 0, 0, 0)) * 1_000_000_000
SAW_PERIOD = 60  # exports per tooth (10 minutes at 10 s)
SAW_BYTES = 3 << 30  # what a tooth climbs
BASE_BYTES = 6 << 30  # the floor of every rank
LEAKING_RANK = 3
LEAK_PER_PERIOD = 24 << 20
_HOST = "bench"
_OWNED_BY_ONE = ("yeto.node.", "yeto.cgroup.")  # observed by one process per host / cgroup


def template_batch(env: dict | None = None) -> dict:
    """The last metrics line of a real process run under `opentelemetry-instrument` (the
    census on, exporting every 300 ms), parsed."""
    with tempfile.TemporaryDirectory(prefix="telemetry-template-") as work:
        child_env = {k: v for k, v in (env or os.environ).items()
                     if not k.startswith(("OTEL_", "YETO_"))}
        child_env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="8", YETO_OTEL_LOCAL_DIR=work,
                         OTEL_METRIC_EXPORT_INTERVAL="300")
        instrument = Path(sys.executable).with_name("opentelemetry-instrument")
        subprocess.run([str(instrument), sys.executable, "-c", "import time; time.sleep(1.5)"],
                       env=child_env, cwd=work, check=True, timeout=120,
                       stdout=subprocess.DEVNULL)
        files = sorted(Path(work).glob("metrics-*.jsonl"))
        if not files:
            raise RuntimeError("the template run wrote no metrics file")
        lines = files[0].read_text(encoding="utf-8").splitlines()
        return json.loads(lines[-1])


def sawtooth(step: int) -> int:
    """Rank 0's anonymous bytes at export `step`: a climb over SAW_PERIOD exports, a drop."""
    return BASE_BYTES + SAW_BYTES * (step % SAW_PERIOD) // (SAW_PERIOD - 1)


def anonymous(rank: int, step: int) -> int:
    leak = LEAK_PER_PERIOD * (step // SAW_PERIOD) if rank == LEAKING_RANK else 0
    return sawtooth(step) + leak + rank * (64 << 20)


def _rank_batch(template: dict, rank: int, ranks: int) -> tuple[dict, list]:
    """A copy of the template as `rank` exports it, and [(metric name, point)] to fill in."""
    batch = copy.deepcopy(template)
    points = []
    for entry in batch["resourceMetrics"]:
        for attribute in entry["resource"]["attributes"]:
            key, value = attribute["key"], attribute["value"]
            if key == "service.instance.id":
                value["stringValue"] = f"{_HOST}/rank-{rank}"
            elif key == "host.name":
                value["stringValue"] = _HOST
            elif key in ("yeto.rank", "yeto.local_rank"):
                value["intValue"] = str(rank)
            elif key == "yeto.world_size":
                value["intValue"] = str(ranks)
        for scope in entry["scopeMetrics"]:
            if rank:
                scope["metrics"] = [m for m in scope["metrics"]
                                    if not m["name"].startswith(_OWNED_BY_ONE)]
            for metric in scope["metrics"]:
                data = metric.get("sum") or metric.get("gauge") or {}
                for point in data.get("dataPoints", []):
                    point["startTimeUnixNano"] = str(T0 - 5_000_000_000)
                    points.append((metric["name"], point))
    return batch, points


def _value(name: str, rank: int, step: int, old) -> str:
    anon = anonymous(rank, step)
    if name.endswith("memory.anonymous") or name.endswith("private_dirty"):
        return str(anon)
    if name.endswith(("memory.rss", "memory.usage")):
        return str(anon + (1536 << 20))
    if name.endswith("rss_peak"):
        return str(BASE_BYTES + SAW_BYTES + (1536 << 20) + rank * (64 << 20))
    if name.endswith("memory.available"):
        return str((200 << 30) - 8 * anon)
    if name.endswith("anon_pages"):
        return str(8 * anon + (2 << 30))
    return old  # the rest as the real process exported it (running totals stay flat)


def write_day(directory: Path, template: dict, *, hours: float, ranks: int = 8,
              interval_s: float = 10.0) -> int:
    """Write `hours` of exports of `ranks` ranks into `directory`; returns the bytes written."""
    directory.mkdir(parents=True, exist_ok=True)
    steps = int(hours * 3600 / interval_s)
    written = 0
    for rank in range(ranks):
        batch, points = _rank_batch(template, rank, ranks)
        name = f"metrics-{_HOST}_rank-{rank}-20260302T000000-{1000 + rank}.jsonl"
        with open(directory / name, "w", encoding="utf-8") as out:
            for step in range(steps):
                at = str(T0 + int(step * interval_s * 1e9) + rank * 1_000_000)
                for metric, point in points:
                    point["timeUnixNano"] = at
                    if "asInt" in point:
                        point["asInt"] = _value(metric, rank, step, point["asInt"])
                line = json.dumps(batch, separators=(",", ":")) + "\n"
                out.write(line)
                written += len(line)
    return written

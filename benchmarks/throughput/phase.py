"""A phase: a fresh stack (agent, Jaeger, Prometheus) and one load generator per simulated
host; what the ranks exported, and the wait until the agent has passed all of it on."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from .common import RANKS_PER_HOST, SERVICE_NAME
from .loadgen import LoadGen
from .telemetry import agent_counts, drop_counters, scrape


class Phase:
    def __init__(self, make_stack, name: str, ranks: int, workdir: Path):
        self.name, self.ranks = name, ranks
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True)
        self.stack = make_stack(self.workdir / "stack")
        self.hosts = [list(range(h, min(ranks, h + RANKS_PER_HOST)))
                      for h in range(0, ranks, RANKS_PER_HOST)]
        self.gens: list[LoadGen] = []
        self.exported = {"points": 0, "exports": 0, "spans": 0, "spans_created": 0,
                         "failed_points": 0, "failed_exports": 0, "failed_spans": 0}
        self.points_per_export: dict[str, list[int]] = {}
        self.failures: list[str] = []

    def start_stack(self) -> None:
        self.stack.start()

    def start_loadgens(self, shape: dict | None = None) -> None:
        for h, ranks in enumerate(self.hosts):
            config = {"host": f"bench-host-{h:02d}", "ranks": ranks, "world_size": self.ranks,
                      "endpoint": self.stack.agent_otlp_grpc, "service": SERVICE_NAME,
                      "workdir": str(self.workdir), "shape": shape}
            self.gens.append(LoadGen(config, self.workdir / f"loadgen-{h:02d}.log"))
        for g in self.gens:
            g.expect("ready", timeout=180)

    def go(self, interval_s: float, restart: bool, span_queue: int = 2048) -> float:
        """Start every rank; returns the monotonic time by which all have started."""
        for g in self.gens:
            g.send({"cmd": "go", "interval_s": interval_s, "restart": restart,
                    "span_queue": span_queue})
        return max(g.expect("started", timeout=120)["t"] for g in self.gens)

    def stop(self) -> None:
        for g in self.gens:
            g.send({"cmd": "stop"})
        for g in self.gens:
            result = g.expect("stopped", timeout=120)
            for key in self.exported:
                self.exported[key] += result[key]
            self.points_per_export.update(result["points_per_export"])

    def drain(self, spans: int | None = None, timeout: float = 120.0) -> dict:
        """Poll the agent until it accepted everything the ranks exported and sent it on.

        Metrics and spans once the ranks are stopped; with `spans` (while the ranks run and
        export metrics), only the spans. Returns early once a drop counter is above 0: what
        was dropped will never be sent."""
        deadline = time.monotonic() + timeout
        while True:
            metrics = scrape(self.stack.agent_telemetry_url)
            counts = agent_counts(metrics)
            if self._drained(counts, spans):
                return counts
            dropped = {k: v for k, v in drop_counters(metrics).items() if v}
            if dropped or time.monotonic() > deadline:
                why = f"drops {dropped}" if dropped else f"not within {timeout:g} s"
                expected = (f"{spans} spans" if spans is not None else
                            f"{self.exported['points']} points, {self.exported['spans']} spans")
                self.failures.append(
                    f"{self.name}: not everything went through ({why}): the agent accepted "
                    f"{counts['accepted_points']:.0f} points, {counts['accepted_spans']:.0f} "
                    f"spans and sent {counts['sent_points']:.0f} points, "
                    f"{counts['sent_spans']:.0f} spans; the ranks exported {expected}")
                return counts
            time.sleep(0.1)

    def _drained(self, counts: dict, spans: int | None) -> bool:
        spans_done = (counts["accepted_spans"] == (self.exported["spans"] if spans is None
                                                   else spans)
                      and counts["sent_spans"] == counts["accepted_spans"])
        points_done = spans is not None or (
            counts["accepted_points"] == self.exported["points"]
            and counts["sent_points"] == counts["accepted_points"]
            and counts["queue_size"] == 0 and counts["in_flight"] == 0)
        return spans_done and points_done

    def jaeger_telemetry_url(self) -> str:
        return f"http://127.0.0.1:{self.stack.ports['jaeger_telemetry']}/metrics"

    def close(self) -> None:
        for g in self.gens:
            g.close()
        self.gens = []
        # The agent's and Jaeger's own counters as they were at the end, beside the logs.
        for name, url in (("agent", self.stack.agent_telemetry_url),
                          ("jaeger", self.jaeger_telemetry_url())):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    (self.workdir / f"{name}-telemetry.txt").write_bytes(response.read())
            except OSError:
                pass
        self.stack.close()

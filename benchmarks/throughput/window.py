"""One measurement window: CPU of the agent, the load generators, the backends and the
machine; the agent's counters at both ends; its memory during it."""

from __future__ import annotations

import os
import threading
import time

from .common import MiB
from .loadgen import LoadGen
from .machine import cpu_seconds, machine_busy, memory
from .telemetry import agent_counts, scrape


class Sampler(threading.Thread):
    """The agent's VmRSS every 0.5 s and its Go heap every 2 s, during a window."""

    def __init__(self, pid: int, telemetry_url: str):
        super().__init__(daemon=True)
        self.pid, self.url = pid, telemetry_url
        self.rss: list[int] = []  # bytes
        self.heap: list[float] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop_event.is_set():
            self.rss.append(memory(self.pid)["rss"])
            if n % 4 == 0:
                try:
                    self.heap.append(agent_counts(scrape(self.url))["heap_alloc"])
                except OSError:
                    pass
            n += 1
            self._stop_event.wait(0.5)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


class Window:
    """CPU of the agent, the load generators, the backends and the machine over a window;
    the agent's counters at both ends; its memory during it."""

    def __init__(self, stack, gens: list[LoadGen]):
        self.stack, self.gens = stack, gens
        self.agent = stack.pid("agent")
        self.backends = [stack.pid("jaeger"), stack.pid("prometheus")]

    def _cpu(self) -> dict:
        return {"t": time.monotonic(), "agent": cpu_seconds(self.agent),
                "loadgen": sum(cpu_seconds(g.pid) for g in self.gens),
                "backends": sum(cpu_seconds(p) for p in self.backends),
                "machine": machine_busy()}

    def begin(self) -> None:
        self.start_counts = agent_counts(scrape(self.stack.agent_telemetry_url))
        self.start_cpu = self._cpu()
        self.sampler = Sampler(self.agent, self.stack.agent_telemetry_url)
        self.sampler.start()

    def end(self) -> dict:
        end_cpu = self._cpu()
        self.sampler.stop()
        end_counts = agent_counts(scrape(self.stack.agent_telemetry_url))
        agent_memory = memory(self.agent)
        s, e = self.start_cpu, end_cpu
        seconds = e["t"] - s["t"]
        busy = (e["machine"][0] - s["machine"][0]) / max(1, e["machine"][1] - s["machine"][1])
        points = end_counts["accepted_points"] - self.start_counts["accepted_points"]
        spans = end_counts["accepted_spans"] - self.start_counts["accepted_spans"]
        agent_cpu = 100 * (e["agent"] - s["agent"]) / seconds
        rss = self.sampler.rss or [agent_memory["rss"]]
        return {
            "seconds": round(seconds, 2),
            "points": int(points), "spans": int(spans),
            "points_per_s": points / seconds, "spans_per_s": spans / seconds,
            "agent_cpu_pct": agent_cpu,
            "agent_cpu_ms_per_1000_points": (1e6 * (e["agent"] - s["agent"]) / points
                                             if points else None),
            "loadgen_cpu_pct": 100 * (e["loadgen"] - s["loadgen"]) / seconds,
            "backends_cpu_pct": 100 * (e["backends"] - s["backends"]) / seconds,
            "machine_busy_pct": 100 * busy * os.cpu_count(),
            "rss_mean_mib": sum(rss) / len(rss) / MiB, "rss_max_mib": max(rss) / MiB,
            "vmhwm_mib": agent_memory["hwm"] / MiB,
            "heap_max_mib": max(self.sampler.heap, default=end_counts["heap_alloc"]) / MiB,
        }

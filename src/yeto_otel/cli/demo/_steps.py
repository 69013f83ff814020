"""The training-like steps after the restart: each holds more memory, every RELEASE_EVERY-th
releases it all (the sawtooth a census must not mistake for a leak), each runs in a
`demo.step` span and writes one step-log record with the host-memory census."""

from __future__ import annotations

import json
import math
import random
import time

from ... import names
from ...census import ANONYMOUS, RSS, CensusReader, HostCacheReleasePolicy, add_census_to_step_log
from ...settings import Settings
from ...units import format_bytes
from ._plan import RELEASE_EVERY, Plan
from ._progress import Progress

__all__ = ["RELEASE_EVERY", "run_steps"]


def _pinned_available() -> bool:
    import torch

    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


class _HeldMemory:
    """What the steps hold: anonymous memory, and with CUDA half of each step in pinned host
    memory (the host allocator's share, which the census reports separately)."""

    def __init__(self, step_bytes: int, pinned: bool):
        self.anonymous_bytes = step_bytes // 2 if pinned else step_bytes
        self.pinned_bytes = step_bytes - self.anonymous_bytes if pinned else 0
        self.blocks: list = []
        self.peak = 0

    def grow(self) -> int:
        """Allocate and touch one step's memory; returns the bytes now held."""
        import torch

        if self.anonymous_bytes:
            self.blocks.append(torch.ones(self.anonymous_bytes, dtype=torch.uint8))
        if self.pinned_bytes:
            block = torch.empty(self.pinned_bytes, dtype=torch.uint8, pin_memory=True)
            self.blocks.append(block.fill_(1))  # touched, so it is resident
        held = sum(t.numel() for t in self.blocks)
        self.peak = max(self.peak, held)
        return held

    def release(self) -> None:
        self.blocks.clear()


class _Steps:
    """The state the steps share: the plan, the census reader, the held memory, the log."""

    def __init__(self, plan: Plan, progress: Progress, settings: Settings, pinned: bool, log):
        self.plan = plan
        self.progress = progress
        self.settings = settings
        self.log = log
        self.reader = CensusReader.from_settings(settings, node_metrics=False)
        # With pinned memory the host allocator caches freed blocks; release them when the
        # cache holds more than one step's worth, judged from gauges only
        # (HostCacheReleasePolicy).
        self.policy = (HostCacheReleasePolicy(plan.step_size, self.reader.allocator)
                       if pinned else None)
        self.memory = _HeldMemory(plan.step_size, pinned)
        self.rng = random.Random(plan.seed + 2)

    def step(self, step: int, span) -> None:
        started = time.monotonic()
        held_bytes = self.memory.grow()
        loss = 2.5 * math.exp(-step / 20) + self.rng.uniform(-0.05, 0.05)
        if self.plan.step_seconds:  # the "compute", so the census sees each tooth
            time.sleep(max(0.0, self.plan.step_seconds - (time.monotonic() - started)))
        released = step % RELEASE_EVERY == 0
        if released:
            self.memory.release()
        record = self._write_record(step, loss)
        span.set_attributes({names.DEMO_STEP_NUMBER.name: step, names.DEMO_LOSS.name: loss,
                             names.DEMO_HELD_BYTES.name: held_bytes,
                             names.DEMO_RELEASED.name: released})
        note = self._host_cache_note() if released else ""
        rss, anonymous = self._memory_now(record)
        self.progress(f"step {step}/{self.plan.steps}: loss {loss:.3f}, held "
                      f"{format_bytes(held_bytes)}{' -> released' if released else ''}, RSS "
                      f"{_size_or_q(rss)}, anonymous {_size_or_q(anonymous)}{note}")

    def _write_record(self, step: int, loss: float) -> dict:
        record = {"step": step, "time_unix_nano": time.time_ns(), "loss": round(loss, 6)}
        # The demo is its sync group's rank 0, so the census goes into every record.
        add_census_to_step_log(record, rank=0, settings=self.settings)
        self.log.write(json.dumps(record) + "\n")
        self.log.flush()  # a reader (`yeto-otel report`) may follow the file while we run
        return record

    def _host_cache_note(self) -> str:
        if self.policy is None:
            return ""
        decision = self.policy.maybe_release(self.reader.take())
        return f"; host cache: {decision.reason}" + (" -> released" if decision.released else "")

    def _memory_now(self, record: dict) -> tuple[int | None, int | None]:
        """RSS and anonymous bytes from the step-log record, or from a census of our own when
        the record has none (the user turned the step-log census off)."""
        rss, anonymous = record.get(RSS.step_log_key), record.get(ANONYMOUS.step_log_key)
        if rss is None or anonymous is None:
            snapshot = self.reader.take()
            rss, anonymous = (_value(snapshot.get(RSS.name)),
                              _value(snapshot.get(ANONYMOUS.name)))
        return rss, anonymous


def _value(quantity) -> int | None:
    return quantity.value if quantity is not None else None


def _size_or_q(n) -> str:
    return format_bytes(n) if n is not None else "?"


def run_steps(plan: Plan, step_log_path: str, progress: Progress, settings: Settings) -> dict:
    """Training-like steps that hold memory for RELEASE_EVERY steps, then release it; returns
    their part of the summary."""
    from opentelemetry import trace

    from ...version import __version__

    tracer = trace.get_tracer("yeto_otel.demo", __version__)
    pinned = _pinned_available()
    with open(step_log_path, "a", encoding="utf-8") as log:
        steps = _Steps(plan, progress, settings, pinned, log)
        for step in range(1, plan.steps + 1):
            with tracer.start_as_current_span(names.DEMO_STEP.name) as span:
                steps.step(step, span)
    steps.memory.release()
    return {"steps": plan.steps, "step_memory": "pinned + anonymous" if pinned else "anonymous",
            "pinned": pinned,
            "step_bytes": plan.step_size, "peak_held_bytes": steps.memory.peak,
            "release_every": RELEASE_EVERY}

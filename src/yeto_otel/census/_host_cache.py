"""Release the accelerator host cache when it holds too much, judged from gauges only.

The policy an ops callback once tried to implement as
`allocated_bytes.current - active_bytes.current > threshold`. On builds where frees never
reach `active_bytes`, the right-hand side is a running total; the difference goes negative
and stays there, and the release never runs. Census quantities refuse that subtraction
(`TypeError`), so this policy looks at what the allocator holds from the OS, which is what
the OS (and MemAvailable) feel, and subtracts what tensors still use only when that count
has been proven to be a gauge.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ._allocator import AllocatorSource
from ._quantity import Kind
from ._snapshot import CensusSnapshot
from ._table import allocator_metric

__all__ = ["HostCacheReleasePolicy", "ReleaseDecision"]

_log = logging.getLogger("yeto_otel.host_cache")

HELD = allocator_metric("allocated_bytes", "current").name
ACTIVE = allocator_metric("active_bytes", "current").name


@dataclass(frozen=True)
class ReleaseDecision:
    release: bool
    releasable_bytes: int | None  # what the decision compared with the threshold
    reason: str
    released: bool = False


class HostCacheReleasePolicy:
    """`maybe_release(snapshot)` empties the host cache when its releasable bytes pass a threshold.

    Releasable bytes: held minus active when `active_bytes.current` is proven a gauge; else
    everything held (an over-estimate, which errs toward releasing, the safe side for host
    memory).
    """

    def __init__(self, threshold_bytes: int, source: AllocatorSource | None):
        if threshold_bytes < 0:
            raise ValueError(f"threshold_bytes must be >= 0, got {threshold_bytes}")
        self.threshold_bytes = threshold_bytes
        self.source = source
        self._failure_logged = False

    def decide(self, snapshot: CensusSnapshot) -> ReleaseDecision:
        held = snapshot.get(HELD)
        if held is None:
            return ReleaseDecision(False, None, "no host allocator data")
        active = snapshot.get(ACTIVE)
        if held.kind is Kind.GAUGE and active is not None and active.kind is Kind.GAUGE:
            releasable = int(held - active)
            basis = "held minus active"
        else:
            # Comparing with a threshold is fine whatever the kind: until the cache is first
            # emptied allocated_bytes.current equals its running total, and that is the
            # bytes held.
            releasable = int(held)
            basis = "held (active_bytes not proven a gauge)"
        verdict = ">" if releasable > self.threshold_bytes else "<="
        return ReleaseDecision(verdict == ">", releasable,
                               f"{basis} = {releasable} B {verdict} {self.threshold_bytes} B")

    def maybe_release(self, snapshot: CensusSnapshot) -> ReleaseDecision:
        decision = self.decide(snapshot)
        if not decision.release or self.source is None:
            return decision
        try:
            released = self.source.empty_cache()
        except Exception as exc:  # e.g. RuntimeError on a CPU-only torch build
            if not self._failure_logged:
                self._failure_logged = True
                _log.warning("host cache release via %s failed: %s: %s", self.source.name,
                             type(exc).__name__, exc)
            released = False
        return ReleaseDecision(True, decision.releasable_bytes, decision.reason, released)

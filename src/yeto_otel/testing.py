"""A stand-in for the accelerator host allocator, for tests, benchmarks and demos on machines
without an accelerator.

It returns the flat dict `torch.cuda.host_memory_stats()` returns (`active_bytes.current`,
`num_host_alloc`, ...), with every key taken from the census table, so a stand-in cannot drift
from what the census reads. Use an instance in code, or name one of the instances below in
`YETO_OTEL_HOST_ALLOCATOR` (any process, no code change):

    YETO_OTEL_HOST_ALLOCATOR=yeto_otel.testing:realistic   a CUDA build that pinned ~600 MiB
    YETO_OTEL_HOST_ALLOCATOR=yeto_otel.testing:moving      counters that move on every query
    YETO_OTEL_HOST_ALLOCATOR=yeto_otel.testing:settable    whatever a test puts in `.stats`

    from yeto_otel.testing import HostAllocatorStandIn
    allocator = HostAllocatorStandIn(HostAllocatorStandIn.full_stats(freed=5))
    reader = CensusReader(allocator=allocator.source(), node_metrics=False)
"""

from __future__ import annotations

from collections.abc import Mapping

from .census import ALLOCATOR_COUNTERS, ALLOCATOR_FIELDS, ALLOCATOR_STATS, AllocatorSource

__all__ = ["HostAllocatorStandIn", "moving", "realistic", "settable"]

_MiB = 1 << 20

# Per stat: (current, peak, allocated, freed) of a CUDA build that has pinned a few hundred
# MiB; `.freed` > 0 everywhere, so every `.current` is exported as a gauge.
_REALISTIC = {
    "allocations": (37, 64, 1_204, 1_167),
    "allocated_bytes": (612 * _MiB, 1_024 * _MiB, 19_456 * _MiB, 18_844 * _MiB),
    "active_requests": (21, 48, 88_311, 88_290),
    "active_bytes": (401 * _MiB, 980 * _MiB, 733_001 * _MiB, 732_600 * _MiB),
}
# Keys torch also returns that the census does not read (timings in microseconds).
_UNREAD = {
    "host_alloc_time.total": 812_345, "host_alloc_time.max": 9_876,
    "host_alloc_time.min": 3, "host_alloc_time.count": 1_204,
    "host_free_time.total": 301_122, "host_free_time.max": 4_321,
    "host_free_time.min": 2, "host_free_time.count": 1_167,
}


class HostAllocatorStandIn:
    """A callable returning host allocator stats; counts its calls.

    `stats`: what the next call returns (a new dict per call, as torch builds one; anything
    that is not a mapping is returned as it is, to test junk). `raises`: an exception the next
    calls raise instead. `moving=True`: counters grow and frees move on every call.
    """

    def __init__(self, stats: object = None, *, moving: bool = False):
        self.stats: object = {} if stats is None else stats
        self.raises: BaseException | None = None
        self.moving = moving
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        if self.moving:
            self.stats = self.moving_stats(self.calls)
        return dict(self.stats) if isinstance(self.stats, Mapping) else self.stats

    def source(self, name: str = "stand-in") -> AllocatorSource:
        """This stand-in as the census's allocator source (it cannot empty a cache)."""
        return AllocatorSource(name, self)

    @staticmethod
    def flat_stats(current: int = 0, peak: int = 0, allocated: int = 0, freed: int = 0,
                   stat: str = "active_bytes") -> dict[str, int]:
        """The four keys of one stat."""
        return dict(zip((f"{stat}.{field}" for field in ALLOCATOR_FIELDS),
                        (current, peak, allocated, freed)))

    @classmethod
    def full_stats(cls, freed: int = 0, **overrides: int) -> dict[str, int]:
        """Every key the census reads: each stat at 1000 now, 1500 at its peak, `freed` freed;
        the call counters at 7 and 2. `overrides` replace single keys (pass them as
        `**{"active_bytes.current": 5}`)."""
        stats: dict[str, int] = {}
        for stat in ALLOCATOR_STATS:
            stats.update(cls.flat_stats(1000, 1500, 1000 + freed, freed, stat))
        stats.update(zip(ALLOCATOR_COUNTERS, (7, 2)))
        stats.update(overrides)
        return stats

    @classmethod
    def realistic_stats(cls) -> dict[str, int]:
        """A CUDA build's stats after pinning a few hundred MiB, with keys the census skips."""
        stats: dict[str, int] = {}
        for stat, values in _REALISTIC.items():
            stats.update(cls.flat_stats(*values, stat=stat))
        stats.update(zip(ALLOCATOR_COUNTERS, (1_204, 1_167)))
        stats.update(_UNREAD)
        return stats

    @classmethod
    def moving_stats(cls, call: int) -> dict[str, int]:
        """Stats of the `call`-th query of a busy allocator: allocations and frees both grow,
        so every metric, gauges and running totals alike, is exported and changes."""
        stats: dict[str, int] = {}
        for stat in ALLOCATOR_STATS:
            unit = 4096 if stat.endswith("bytes") else 1
            allocated, freed = (100 + 3 * call) * unit, (40 + 2 * call) * unit
            stats.update(cls.flat_stats(allocated - freed, allocated - freed, allocated, freed,
                                        stat))
        stats.update(zip(ALLOCATOR_COUNTERS, (10 + call, 5 + call)))
        return stats


realistic = HostAllocatorStandIn(HostAllocatorStandIn.realistic_stats())
moving = HostAllocatorStandIn(moving=True)
settable = HostAllocatorStandIn()

"""A stand-in host allocator for the census tests, reachable as `fake_allocator:stats`.

Tests set `RESULT` (what `stats()` returns) or `RAISE` (an exception it raises) with
`monkeypatch.setattr`, so every change is undone after the test.
"""

from __future__ import annotations

RESULT: object = {}
RAISE: BaseException | None = None
calls = 0


def stats() -> object:
    global calls
    calls += 1
    if RAISE is not None:
        raise RAISE
    return RESULT


class nested:  # reachable as `fake_allocator:nested.stats`
    stats = staticmethod(stats)


not_callable = {"active_bytes.current": 1}


def flat_stats(current: int = 0, peak: int = 0, allocated: int = 0, freed: int = 0,
               stat: str = "active_bytes") -> dict[str, int]:
    """The flat dict shape of `torch.cuda.host_memory_stats()` for one stat."""
    return {f"{stat}.current": current, f"{stat}.peak": peak,
            f"{stat}.allocated": allocated, f"{stat}.freed": freed}

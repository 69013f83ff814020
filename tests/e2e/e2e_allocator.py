"""A host allocator for the e2e ranks (YETO_OTEL_HOST_ALLOCATOR=e2e_allocator:stats): every
stat of `torch.cuda.host_memory_stats()`, with frees that move, so all allocator metrics, gauges
and running totals alike, are exported through the real pipeline."""

_calls = 0


def stats() -> dict[str, int]:
    global _calls
    _calls += 1
    out = {"num_host_alloc": 10 + _calls, "num_host_free": 5 + _calls}
    for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes"):
        unit = 4096 if stat.endswith("bytes") else 1
        allocated, freed = (100 + 3 * _calls) * unit, (40 + 2 * _calls) * unit
        out.update({f"{stat}.current": allocated - freed, f"{stat}.peak": allocated - freed,
                    f"{stat}.allocated": allocated, f"{stat}.freed": freed})
    return out

"""A stand-in for the accelerator host allocator, for the benchmarks: the flat dict
`torch.cuda.host_memory_stats()` returns on a CUDA build that has pinned a few hundred MiB, with
`.freed` > 0 so every `.current` is exported as a gauge. Reached as
`YETO_OTEL_HOST_ALLOCATOR=fake_host_allocator:fake_host_memory_stats` (benchmarks/ is on
sys.path when a script in it runs)."""

_MiB = 1 << 20
_STATS = {
    "allocations.current": 37, "allocations.peak": 64,
    "allocations.allocated": 1_204, "allocations.freed": 1_167,
    "allocated_bytes.current": 612 * _MiB, "allocated_bytes.peak": 1_024 * _MiB,
    "allocated_bytes.allocated": 19_456 * _MiB, "allocated_bytes.freed": 18_844 * _MiB,
    "active_requests.current": 21, "active_requests.peak": 48,
    "active_requests.allocated": 88_311, "active_requests.freed": 88_290,
    "active_bytes.current": 401 * _MiB, "active_bytes.peak": 980 * _MiB,
    "active_bytes.allocated": 733_001 * _MiB, "active_bytes.freed": 732_600 * _MiB,
    "num_host_alloc": 1_204, "num_host_free": 1_167,
    "host_alloc_time.total": 812_345, "host_alloc_time.max": 9_876,
    "host_alloc_time.min": 3, "host_alloc_time.count": 1_204,
    "host_free_time.total": 301_122, "host_free_time.max": 4_321,
    "host_free_time.min": 2, "host_free_time.count": 1_167,
}


def fake_host_memory_stats() -> dict:
    """A new dict per call, as torch builds one per call."""
    return dict(_STATS)



ALLOCATOR_REF = "fake_host_allocator:fake_host_memory_stats"

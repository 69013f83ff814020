"""The numbers of a memory cgroup from its files, v2 in cgroup-v2.rst's formats and v1 as this
kernel writes it: limits that say "none", odd files, files an older kernel lacks."""

from repo_paths import ROOT
from yeto_otel.proc import (UNLIMITED_FROM, MemoryCgroupFiles, locate_memory_cgroup,
                            parse_flat_keyed, parse_pressure_totals, parse_single_value)

FIXTURES = ROOT / "tests" / "fixtures" / "cgroup"
GiB = 1 << 30

V2_POD_LEVELS = {"usage": 12 * GiB, "limit": 16 * GiB, "high": 15 * GiB, "peak": 14 * GiB,
                 "anon": 8 * GiB, "file": 4194304000, "shmem": 256 << 20,
                 "file_mapped": 3 * GiB, "working_set": 11 * GiB}
V2_EVENTS = {"low": 0, "high": 412, "max": 37, "oom": 2, "oom_kill": 1, "oom_group_kill": 1}


def read(variant: str, times: int = 1):
    root = FIXTURES / variant
    files = MemoryCgroupFiles(locate_memory_cgroup(str(root / "proc"), fs_root=str(root)))
    try:
        return [files.read() for _ in range(times)]
    finally:
        files.close()


def test_v2_every_number():
    (reading,) = read("v2_pod")
    assert reading.levels == V2_POD_LEVELS
    assert reading.events == V2_EVENTS
    assert reading.pressure == {"some": 4.25, "full": 1.75}
    assert reading.problems == []


def test_v2_namespaced_reads_the_same_files():
    (reading,) = read("v2_namespaced")
    assert reading.levels == V2_POD_LEVELS and reading.problems == []


def test_v2_max_is_no_limit_and_a_missing_peak_is_said_once():
    first, second = read("v2_unlimited", times=2)
    assert "limit" not in first.levels and "high" not in first.levels
    assert "peak" not in first.levels
    assert first.levels["usage"] == 12 * GiB
    assert len(first.problems) == 1 and "memory.peak" in first.problems[0]
    assert "not read again" in first.problems[0]
    assert second.problems == []  # not tried again, not counted again


def test_v2_odd_files_are_reported_and_the_rest_kept():
    (reading,) = read("v2_garbage")
    assert "limit" not in reading.levels
    assert reading.levels["usage"] == 12 * GiB and reading.levels["high"] == 15 * GiB
    assert reading.events == {"low": 0, "high": 412}  # "max 3" was cut mid-value: not taken
    assert reading.pressure == {}
    text = "\n".join(reading.problems)
    assert "memory.max" in text and "lots" in text
    assert "memory.events" in text and "max, oom, oom_kill, oom_group_kill missing" in text
    assert "memory.pressure" in text and "some, full" in text


def test_v1_real_text():
    (reading,) = read("v1_hybrid")
    assert reading.levels == {"usage": 36954112, "peak": 217903104, "anon": 8953856,
                              "file": 26701824, "shmem": 0, "file_mapped": 0,
                              "working_set": 36954112 - 12828672}
    assert reading.events == {"oom_kill": 0, "max": 0}
    assert reading.pressure == {} and reading.problems == []


def test_single_values_and_limits():
    assert parse_single_value(b"4096\n") == 4096
    assert parse_single_value(b"max\n", limit=True) is None
    assert parse_single_value(b"9223372036854771712\n", limit=True) is None  # v1, 4 KiB pages
    assert parse_single_value(b"9223372036854710272\n", limit=True) is None  # v1, 64 KiB pages
    assert parse_single_value(str(UNLIMITED_FROM - 4096).encode(), limit=True) == \
        UNLIMITED_FROM - 4096
    for bad in (b"", b"max\n", b"-1\n", b"12a\n"):
        try:
            parse_single_value(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_keyed_and_pressure_parsers():
    assert parse_flat_keyed(b"a 1\nb x\nc 3\n") == {"a": 1, "c": 3}
    assert parse_flat_keyed(b"a 1\nc 3") == {"a": 1}  # cut: the last line may be cut mid-value
    assert parse_pressure_totals(b"some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n") == \
        {"some": 1.5}

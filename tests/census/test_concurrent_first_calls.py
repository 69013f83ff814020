"""Many threads making their first census call at once: the kept-open /proc files are opened
once, so no descriptor is left behind (each thread used to open its own and all but one
leaked)."""

from __future__ import annotations

import math
import os
import threading

from yeto_otel.census import CensusReader, _step_log, add_census_to_step_log
from yeto_otel.settings import Settings

THREADS = 16
ROUNDS = 40  # the race lost 1-2 descriptors in most rounds; 40 clean rounds leave no doubt


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def all_at_once(call) -> list[BaseException]:
    """`call()` on THREADS threads released together by a barrier; what they raised."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def run():
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # reported by the test, not lost in a thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    return errors


def test_first_takes_of_a_shared_reader_open_each_file_once():
    before = open_descriptors()
    for _ in range(ROUNDS):
        # smaps_rollup read on every take, like the other files (not only when its budget allows)
        reader = CensusReader(allocator=None, node_metrics=True, smaps_budget_percent=math.inf)
        assert all_at_once(reader.take) == []
        assert len(open_descriptors() - before) == len(reader.proc_files)  # one per file
        reader.close()
        assert open_descriptors() == before


def test_first_step_log_calls_from_many_threads_leak_nothing(monkeypatch):
    settings = Settings(step_log_census=True, host_allocator="none",
                        smaps_budget_percent=math.inf)
    before = open_descriptors()
    for _ in range(ROUNDS):
        monkeypatch.setattr(_step_log, "_reader", None)
        monkeypatch.setattr(_step_log, "_reader_choice", None)
        records = [{} for _ in range(THREADS)]
        slots = iter(records)
        lock = threading.Lock()

        def call():
            with lock:
                record = next(slots)
            add_census_to_step_log(record, rank=0, settings=settings)

        assert all_at_once(call) == []
        assert all("host_mem.vm_rss_bytes" in record for record in records)
        _step_log._reader.close()
        assert open_descriptors() == before

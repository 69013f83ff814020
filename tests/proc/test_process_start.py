"""A process's start and uptime: the uptime only rises within a process, a new process (a
forked child, a restarted rank) starts again from about zero, and the wall-clock start agrees
with it."""

from __future__ import annotations

import os
import time

from yeto_otel.proc import process_start_ns, process_uptime_s


def test_the_uptime_rises_within_a_process():
    first = process_uptime_s()
    time.sleep(0.02)  # elapsed time is the quantity under test, not a synchronisation
    assert 0 < first < process_uptime_s()


def test_a_forked_child_counts_from_its_own_start():
    parent = process_uptime_s()  # the test run's own: seconds at least
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(write, repr(process_uptime_s()).encode())
        os._exit(0)
    os.close(write)
    uptime = float(os.read(read, 64))
    os.waitpid(child, 0)
    assert 0 <= uptime < parent


def test_the_wall_clock_start_agrees_with_the_uptime():
    # /proc/stat's boot time is whole seconds: the two agree to within one
    started = process_start_ns()
    assert abs((time.time_ns() - started) / 1e9 - process_uptime_s()) < 1.5

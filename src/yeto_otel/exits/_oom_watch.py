"""Noting an OOM kill in this process's memory cgroup as it happens, not at the next collection.

Why: when the kernel kills one rank, its launcher stops the others (torchrun sends SIGTERM
within a second). Those records would all still count the kills as of their last collection,
up to an interval old, and the kill could be any of theirs: the observer could only say
`unknown` for all of them. A survivor whose record already counts the kill is no candidate
(`_cause`): so each process updates its record's counts as soon as the kernel says the cgroup
ran out of memory.

How the kernel says so, without polling:
- cgroup v2: memory.events is a kernfs file that the kernel notifies on every change of its
  counts; `poll()` on it wakes with POLLPRI (cgroup-v2.rst: "generates a file modified event");
- cgroup v1: an eventfd registered in the cgroup's cgroup.event_control against its
  memory.oom_control is signalled at every OOM of the cgroup (cgroup-v1/memory.rst,
  "OOM Control"). Registering needs write access to cgroup.event_control (a read-only cgroup
  mount in a container has none): then there is no watch, and the counts are as of the last
  collection.

The watch is a daemon thread blocked in the kernel; it never runs on the training thread. The
count may be updated a moment after the notification (v1 notifies as the OOM begins), so the
record is refreshed at once and again a little later.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import Callable

__all__ = ["start_oom_watch"]

_log = logging.getLogger(__name__)
_AGAIN_AFTER_S = (0.05, 0.5)  # refresh again after these delays: the kill lands after notice


def start_oom_watch(directory: str, version: int,
                    refresh: Callable[[], None]) -> threading.Thread | None:
    """A daemon thread that calls `refresh` at every OOM of the memory cgroup at `directory`;
    None when the kernel cannot be asked to say so here."""
    try:
        wait = _v2_waiter(directory) if version == 2 else _v1_waiter(directory)
    except OSError as exc:
        _log.debug("yeto-otel: no OOM notification from %s: %s", directory, exc)
        return None
    thread = threading.Thread(target=_watch, args=(wait, refresh), daemon=True,
                              name="yeto-otel-oom-watch")
    thread.start()
    return thread


def _watch(wait: Callable[[], bool], refresh: Callable[[], None]) -> None:
    pid = os.getpid()
    while wait():
        if os.getpid() != pid:
            return
        for delay in (0.0, *_AGAIN_AFTER_S):
            time.sleep(delay)
            try:
                refresh()
            except Exception:  # the record is best effort; the watch goes on
                _log.debug("yeto-otel: refreshing the exit record failed", exc_info=True)


def _v2_waiter(directory: str) -> Callable[[], bool]:
    fd = os.open(os.path.join(directory, "memory.events"), os.O_RDONLY | os.O_CLOEXEC)
    poller = select.poll()
    poller.register(fd, select.POLLPRI | select.POLLERR)
    os.pread(fd, 4096, 0)  # kernfs: a notification is for changes after the last read

    def wait() -> bool:
        try:
            poller.poll()
            os.pread(fd, 4096, 0)
            return True
        except OSError:
            return False
    return wait


def _v1_waiter(directory: str) -> Callable[[], bool]:
    event = os.eventfd(0, os.EFD_CLOEXEC)
    control = os.open(os.path.join(directory, "memory.oom_control"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        with open(os.path.join(directory, "cgroup.event_control"), "w") as f:
            f.write(f"{event} {control}")
    except OSError:
        os.close(event)
        os.close(control)
        raise

    def wait() -> bool:
        try:
            os.eventfd_read(event)
            return True
        except OSError:
            return False
    return wait

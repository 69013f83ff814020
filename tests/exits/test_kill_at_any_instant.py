"""A record stays readable after a SIGKILL at any instant: a process updates its record as fast
as it can (every value of an update derived from one number), is killed at a random moment, and
the record then holds one whole update, never a mix of two."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from yeto_otel.exits._layout import read_header, read_latest_slot

WRITER = r"""
import mmap, os, sys
from yeto_otel.exits._layout import RECORD_SIZE, Header, Slot, write_header, write_slot
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, RECORD_SIZE)
buffer = mmap.mmap(fd, RECORD_SIZE)
write_header(buffer, Header(pid=os.getpid(), instance_id="host/rank-0"))
n = 0
print("ready", flush=True)
while True:
    write_slot(buffer, n, Slot(written_ns=n, step=n, rss=3 * n, anonymous=5 * n,
                               cgroup_usage=7 * n, cgroup_oom_kills=n % 11, phase=f"p{n % 97}"))
    n += 1
"""


def test_a_record_killed_mid_update_holds_one_whole_update(tmp_path):
    rng = random.Random(20261204)
    steps = []
    for attempt in range(12):
        path = tmp_path / f"record-{attempt}"
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.05))  # a random instant, not a synchronisation
        os.kill(writer.pid, signal.SIGKILL)
        assert writer.wait(timeout=30) == -signal.SIGKILL
        data = path.read_bytes()
        assert read_header(data).instance_id == "host/rank-0"
        slot = read_latest_slot(data)
        n = slot.step
        assert (slot.written_ns, slot.rss, slot.anonymous, slot.cgroup_usage,
                slot.cgroup_oom_kills, slot.phase) == (n, 3 * n, 5 * n, 7 * n, n % 11,
                                                       f"p{n % 97}")
        assert slot.seq == 2 * n + 2
        steps.append(n)
    assert len(set(steps)) > 1  # killed at different moments of its updates

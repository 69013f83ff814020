"""Processes the exit-record tests start: an owner that keeps a record and waits to be killed,
and observers that look for dead records at the same moment."""

from __future__ import annotations

import subprocess
import sys

OWNER = r"""
import os, sys
from yeto_otel.exits import ExitRecorder, Header
from yeto_otel.exits._record_file import OwnedRecord
lock_dir, instance = sys.argv[1], sys.argv[2]
record = OwnedRecord(lock_dir, os.geteuid(), os.getpid(), instance)
recorder = ExitRecorder(record, Header(pid=os.getpid(), rank=5, instance_id=instance))
recorder.note_step(41)
recorder.span_started(7, "dcp.save")
print("ready", flush=True)
sys.stdin.readline()
"""

# Looks once when told "go" (all observers are told at once) and prints what it reported.
OBSERVER = r"""
import json, sys
from opentelemetry.sdk.trace import TracerProvider
from yeto_otel.exits import ExitObserver
observer = ExitObserver(sys.argv[1], TracerProvider().get_tracer("t"))
print("ready", flush=True)
sys.stdin.readline()
reports = observer.look()
print(json.dumps([[r.header.instance_id, r.verdict.cause.value, r.phase, r.slot.step]
                  for r in reports]), flush=True)
"""


def start(code: str, *args: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    return process

# Keeps a record whose memory cgroup is the directory given (a copy of a fixture's), with its
# counts read once, then waits to be killed.
CGROUP_OWNER = r"""
import os, sys
from yeto_otel.exits import ExitRecorder, Header
from yeto_otel.exits._evidence import CgroupEvidence
from yeto_otel.exits._record_file import OwnedRecord
lock_dir, directory, version = sys.argv[1], sys.argv[2], int(sys.argv[3])
record = OwnedRecord(lock_dir, os.geteuid(), os.getpid(), "pod/rank-0")
recorder = ExitRecorder(record, Header(pid=os.getpid(), rank=0, instance_id="pod/rank-0",
                                       cgroup_dir=directory, cgroup_version=version),
                        cgroup=CgroupEvidence(directory, version))
recorder.refresh()
print("ready", flush=True)
sys.stdin.readline()
"""

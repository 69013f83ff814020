"""The load-generator process: one simulated host, up to 8 ranks; and `LoadGen`, the
orchestrator's handle on it.

The process is the entry script with `--loadgen CONFIG` (JSON: host, ranks, world_size,
endpoint, service, workdir, shape). They talk in JSON lines: the orchestrator writes commands
to the process's stdin, the process answers with one event each on its stdout:

    go     {interval_s, restart, span_queue} -> started {t}: fresh ranks (SDK providers)
    spans  {restarts_per_s, seconds}         -> spans_done: replayed restarts at a steady pace
    stop                                     -> stopped: the ranks shut down (flushed)
    exit                                     -> (the process ends)

With `shape` in the config the process never imports torch and replays that span shape;
without it, each rank resumes real anchors at `go` with `restart`.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from .common import ENTRY, BenchError, child_env

# ---------------------------------------------------------------------------------------------
# In the load-generator process


def _emit(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(config: dict) -> int:
    """Ranks of one simulated host, driven by commands on stdin."""
    from . import rank as ranks  # OpenTelemetry's SDK and exporters: in this process only

    anchor_path = None
    if config.get("shape") is None:
        anchor_path = ranks.anchor_path_for(config["workdir"], config["host"])
        ranks.save_small_anchors(anchor_path)
    _emit({"event": "ready", "pid": os.getpid(), "host": config["host"],
           "ranks": config["ranks"]})
    live: list = []
    for line in sys.stdin:
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "go":
            live = _go(ranks, config, command, anchor_path)
        elif cmd == "spans":
            _spans(ranks, live, command, config["shape"])
        elif cmd == "stop":
            _stop(ranks, live)
            live = []
        elif cmd == "exit":
            break
    return 0


def _go(ranks, config: dict, command: dict, anchor_path: str | None) -> list:
    live = [ranks.Rank(r, config, command["interval_s"], command.get("span_queue", 2048))
            for r in config["ranks"]]
    if command.get("restart", False):
        for rank in live:
            ranks.restart(anchor_path, rank.tracer_provider)
            rank.spans_created += 2
    _emit({"event": "started", "t": time.monotonic()})
    return live


def _spans(ranks, live: list, command: dict, shape: dict) -> None:
    """Replayed restarts at a steady pace (restarts/s for this process), round robin over the
    ranks, for `seconds`; then every rank's batch processor is flushed."""
    rate, seconds = command["restarts_per_s"], command["seconds"]
    t0 = time.monotonic()
    end = t0 + seconds
    done = 0
    while (now := time.monotonic()) < end:
        due = int((now - t0) * rate)
        while done < due:
            rank = live[done % len(live)]
            ranks.replay_restart(rank.tracer, shape)
            rank.spans_created += 2
            done += 1
        time.sleep(0.002)
    t_created = time.monotonic()
    for rank in live:
        rank.tracer_provider.force_flush()
    _emit({"event": "spans_done", "t0": t0, "t_created": t_created,
           "t_flushed": time.monotonic(), "restarts": done,
           "restarts_scheduled": int(seconds * rate), **ranks.counts(live)})


def _stop(ranks, live: list) -> None:
    for rank in live:
        rank.shutdown()
    _emit({"event": "stopped", **ranks.counts(live),
           "points_per_export": {str(r.settings.rank): r.metric_exporter.points_per_export
                                 for r in live}})


# ---------------------------------------------------------------------------------------------
# In the orchestrator


class LoadGen:
    """One load-generator process (one simulated host)."""

    def __init__(self, config: dict, log_path: Path):
        self.config = config
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(ENTRY), "--loadgen", json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=child_env())
        self.log_path = log_path
        self._buffer = b""
        self.pid = self.proc.pid

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"load generator {self.config['host']}: no {event!r} within "
                                 f"{timeout}s; log {self.log_path}:\n{self.log_tail()}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise BenchError(f"load generator {self.config['host']} exited "
                                     f"({self.proc.wait()}); log {self.log_path}:\n"
                                     f"{self.log_tail()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if message.get("event") != event:
            raise BenchError(f"load generator {self.config['host']}: expected {event!r}, "
                             f"got {message}")
        return message

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "exit"})
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()

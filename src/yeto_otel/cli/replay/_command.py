"""The command: `yeto-otel replay DIR`, its arguments, the stop signals, and the exit code.

Exit codes: 0 everything was sent; 1 something was rejected, or the collector stayed away
past the retry bound; 2 a bad argument or setting (one line), or a destination that refuses
us (401, 403, 404, TLS); 130 / 143 stopped by SIGINT / SIGTERM. SIGINT or SIGTERM lets the
request in flight finish and be recorded, then stops (a second SIGINT stops at once).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from pathlib import Path

from ...errors import UserFacingError
from ...settings import SIGNALS, otlp_exporter_variables
from ._endpoint import add_destination_arguments, destinations
from ._files import discover
from ._ledger import LEDGER_NAME, Ledger
from ._replay_file import INTERRUPTED, Stopped, replay_file
from ._sender import FATAL, RetryPolicy, Sender
from ._summary import Progress, Summary

__all__ = ["DEFAULT_BATCH_BYTES", "add_arguments", "run"]

DEFAULT_BATCH_BYTES = 1 << 20
_MAX_BATCH_BYTES = 64 << 20


def _number(text: str, *, whole: bool, low: float, high: float) -> float:
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise argparse.ArgumentTypeError(f"{text!r} must be {low:g} to {high:g}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="the directory of local telemetry files (YETO_OTEL_LOCAL_DIR)")
    parser.add_argument("--no-steplog", action="store_true",
                        help="leave the step log (steplog-*.jsonl) out")
    parser.add_argument("--ledger", metavar="FILE",
                        help=f"what was sent already (default: DIR/{LEDGER_NAME}); give "
                             "another one to send the same files to another collector")
    parser.add_argument("--batch-bytes", metavar="BYTES", default=DEFAULT_BATCH_BYTES,
                        type=lambda t: int(_number(t, whole=True, low=0, high=_MAX_BATCH_BYTES)),
                        help="merge lines of a file into requests of up to BYTES (default "
                             f"{DEFAULT_BATCH_BYTES}); 0: one line per request")
    parser.add_argument("--max-retry-wait", metavar="SECONDS", default=300.0,
                        type=lambda t: _number(t, whole=False, low=0, high=86_400),
                        help="how long one request may wait in all for an unavailable "
                             "collector (429, 502, 503, 504, no connection) before the run "
                             "stops (default 300)")
    parser.add_argument("--progress-interval", metavar="SECONDS", default=10.0,
                        type=lambda t: _number(t, whole=False, low=0.1, high=86_400),
                        help="when stderr is not a terminal: a progress line this often "
                             "(default 10)")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object")
    add_destination_arguments(parser)


def _directory(args: argparse.Namespace) -> Path:
    directory = Path(args.directory).expanduser()
    if not directory.is_dir():
        raise UserFacingError(f"replay: {directory} is not a directory of telemetry files "
                              "(YETO_OTEL_LOCAL_DIR)")
    return directory


class _StopSignals:
    """SIGINT / SIGTERM ask the run to stop after the request in flight; a second SIGINT
    interrupts at once. The previous handlers come back on exit."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    def _handle(self, signum, frame) -> None:
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum
        self.event.set()

    def __enter__(self) -> "_StopSignals":
        self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)


def run(args: argparse.Namespace) -> int:
    directory = _directory(args)
    files = discover(directory, steplog=not args.no_steplog)
    if not files:
        raise UserFacingError(f"replay: no telemetry files in {directory} (traces-*.jsonl, "
                              "metrics-*.jsonl, logs-*.jsonl, steplog-*.jsonl)")
    signals = tuple(s for s in SIGNALS if any(f.signal == s for f in files))
    where = destinations(otlp_exporter_variables(), args, signals)
    ledger = Ledger(Path(args.ledger).expanduser() if args.ledger
                    else directory / LEDGER_NAME)
    total = sum(_size(f.path) for f in files)
    summary = Summary(Progress(total, sys.stderr, args.progress_interval))
    code = 0
    with _StopSignals() as stop:
        sender = Sender(where, RetryPolicy(max_wait_s=args.max_retry_wait), stop.event.wait)
        try:
            for file in files:
                replay_file(file, sender, ledger, summary, args.batch_bytes,
                            stop.event.is_set)
        except Stopped as stopped:
            summary.stopped = str(stopped)
            code = _stopped_code(stopped, stop.signum)
        except KeyboardInterrupt:  # a second SIGINT: the ledger holds what was settled
            summary.stopped = "interrupted"
            code = 128 + signal.SIGINT
        except OSError as exc:  # the ledger could not be written: stop before sending more
            summary.stopped = f"cannot write the ledger {ledger.path}: {exc.strerror or exc}"
            code = 1
        finally:
            sender.close()
            ledger.close()
    summary.print(str(directory), args.json, sys.stdout)
    return code or (1 if summary.rejected else 0)


def _stopped_code(stopped: Stopped, signum: int | None) -> int:
    if signum is not None or stopped.outcome == INTERRUPTED:
        return 128 + (signum or signal.SIGINT)
    return 2 if stopped.outcome == FATAL else 1


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0

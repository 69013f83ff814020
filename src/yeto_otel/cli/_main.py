"""`yeto-otel` command line.

    yeto-otel census [--json] [--watch SECONDS [--count N]]
    yeto-otel demo [options]          a realistic island restart, end to end
    yeto-otel report DIR [-o FILE]    one offline HTML page from the local telemetry files
    yeto-otel replay DIR [options]    send the local telemetry files to a collector (OTLP/HTTP)
"""

from __future__ import annotations

import argparse
import math
import sys

from ..errors import UserFacingError
from ..settings import SettingsError
from . import _census

__all__ = ["main"]


# The longest --watch interval: a day (longer is not watching; it also keeps time.sleep far
# from the largest interval it takes).
_MAX_WATCH_SECONDS = 86_400


def _interval(text: str) -> float:
    """--watch SECONDS: a finite number of seconds, more than 0 and at most a day (NaN and
    infinity are refused here, not by time.sleep with a traceback)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= _MAX_WATCH_SECONDS):
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 and at most "
                                         f"{_MAX_WATCH_SECONDS} seconds")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="yeto-otel", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    census = commands.add_parser("census", help="print one snapshot of the host-memory census")
    census.add_argument("--json", action="store_true", help="one JSON object per snapshot")
    census.add_argument("--watch", type=_interval, metavar="SECONDS",
                        help="repeat every SECONDS until interrupted")
    census.add_argument("--count", type=_count, metavar="N", help="with --watch: stop after N")
    census.set_defaults(run=_census.run)

    # demo and report live in their own modules; they import their heavier dependencies
    # (torch, plotly) only when they run.
    from . import demo, replay, report

    demo_parser = commands.add_parser("demo", help="save synthetic anchors, restart from them, "
                                                   "and run a few training-like steps")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(run=demo.run)
    report_parser = commands.add_parser("report", help="write one self-contained HTML page "
                                                       "from the local telemetry files")
    report.add_arguments(report_parser)
    report_parser.set_defaults(run=report.run)
    replay_parser = commands.add_parser("replay", help="send the local telemetry files to a "
                                                       "collector's OTLP/HTTP endpoint, "
                                                       "resuming where the last run stopped")
    replay.add_arguments(replay_parser)
    replay_parser.set_defaults(run=replay.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (SettingsError, UserFacingError) as exc:
        print(f"yeto-otel: {exc}", file=sys.stderr)
        return 2


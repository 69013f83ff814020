"""`yeto-otel` command line.

    yeto-otel census [--json] [--watch SECONDS [--count N]]
    yeto-otel demo [options]          a realistic island restart, end to end
    yeto-otel report DIR [-o FILE]    one offline HTML page from the local telemetry files
"""

from __future__ import annotations

import argparse
import sys

from ..errors import UserFacingError
from ..settings import SettingsError
from . import _census

__all__ = ["main"]


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="yeto-otel", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    census = commands.add_parser("census", help="print one snapshot of the host-memory census")
    census.add_argument("--json", action="store_true", help="one JSON object per snapshot")
    census.add_argument("--watch", type=_positive, metavar="SECONDS",
                        help="repeat every SECONDS until interrupted")
    census.add_argument("--count", type=int, metavar="N", help="with --watch: stop after N")
    census.set_defaults(run=_census.run)

    # demo and report live in their own modules; they import their heavier dependencies
    # (torch, plotly) only when they run.
    from . import demo, report

    demo_parser = commands.add_parser("demo", help="save synthetic anchors, restart from them, "
                                                   "and run a few training-like steps")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(run=demo.run)
    report_parser = commands.add_parser("report", help="write one self-contained HTML page "
                                                       "from the local telemetry files")
    report.add_arguments(report_parser)
    report_parser.set_defaults(run=report.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except (SettingsError, UserFacingError) as exc:
        print(f"yeto-otel: {exc}", file=sys.stderr)
        return 2


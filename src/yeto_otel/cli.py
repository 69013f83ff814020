"""`yeto-otel` command line.

    yeto-otel census [--json] [--watch SECONDS [--count N]]
    yeto-otel demo [options]          a realistic island restart, end to end
    yeto-otel report DIR [-o FILE]    one offline HTML page from the local telemetry files
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .allocator import resolve_allocator
from .census_table import CENSUS, Source
from .quantity import Kind, Quantity
from .errors import UserFacingError
from .settings import SettingsError, load_settings
from .snapshot import CensusReader, CensusSnapshot
from .units import format_bytes

__all__ = ["main"]


def _human(quantity: Quantity) -> str:
    if quantity.unit != "By":
        return f"{quantity.value:,} {quantity.unit.strip('{}')}"
    return format_bytes(quantity.value, decimals=2)


def _rows(snapshot: CensusSnapshot) -> list[dict]:
    rows = []
    for m in CENSUS:
        quantity = snapshot.get(m.name)
        if quantity is None:
            continue
        rows.append({"metric": m.name, "value": quantity.value, "unit": quantity.unit,
                     "kind": quantity.kind.value, "source": m.source.value})
    return rows


def _table(snapshot: CensusSnapshot, reader: CensusReader) -> str:
    lines = []
    width = max(len(m.name) for m in CENSUS)
    header = f"{'metric':<{width}}  {'value':>16}  kind"
    lines.append(header)
    lines.append("-" * len(header) + "-" * 16)
    for m in CENSUS:
        quantity = snapshot.get(m.name)
        if quantity is None:
            continue
        note = ""
        if m.source is Source.ALLOCATOR and m.field.endswith(".current"):
            note = ("  (gauge: .freed moves)" if quantity.kind is Kind.GAUGE
                    else "  (running total: .freed never moved; not exported as a gauge)")
        lines.append(f"{m.name:<{width}}  {_human(quantity):>16}  {quantity.kind.value}{note}")
    allocator = reader.allocator.name if reader.allocator else "none"
    if not any(m.source is Source.ALLOCATOR for m in CENSUS if m.name in snapshot):
        lines.append(f"(host allocator: {allocator}; no counters available in this process)")
    errors = reader.ledger.counts()
    if errors:
        lines.append("skipped: " + ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())))
    return "\n".join(lines)


def _census(args: argparse.Namespace) -> int:
    settings = load_settings()
    reader = CensusReader(allocator=resolve_allocator(settings.host_allocator), node_metrics=True)
    taken = 0
    try:
        while True:
            snapshot = reader.take()
            if args.json:
                print(json.dumps({"taken_ns": snapshot.taken_ns, "metrics": _rows(snapshot),
                                  "errors": reader.ledger.counts()}), flush=True)
            else:
                print(_table(snapshot, reader), flush=True)
            taken += 1
            if args.watch is None or (args.count is not None and taken >= args.count):
                return 0
            if not args.json:
                print(flush=True)
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0


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
    census.set_defaults(run=_census)

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


if __name__ == "__main__":
    sys.exit(main())

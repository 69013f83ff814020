"""`yeto-otel census [--json] [--watch SECONDS [--count N]]`: this machine's census, now."""

from __future__ import annotations

import argparse
import json
import time

from ..census import CENSUS, CensusReader, CensusSnapshot, Kind, Quantity, Source
from ..settings import load_settings
from ..units import format_bytes

__all__ = ["run"]


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


def run(args: argparse.Namespace) -> int:
    # A look at this machine, not a reporter: it reads the cgroup without taking its election.
    reader = CensusReader.from_settings(load_settings(), node_metrics=True, cgroup_elected=False)
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

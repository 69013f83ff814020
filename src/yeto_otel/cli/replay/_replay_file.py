"""Sending one file: its complete lines from where the ledger says, merged into requests of up
to `batch_bytes`, each request's answer settled in the ledger before the next is sent.

Merging: consecutive lines of one file go into one request (their `resourceSpans` /
`resourceMetrics` / `resourceLogs` lists joined; step-log records into one `resourceLogs`)
until the request reaches `batch_bytes`; a longer line is sent alone. A request the collector
refuses as a whole (400, 413, ...) is sent again one line per request, so the line at fault is
named and the others still go (a refused request was not taken in part, so nothing is sent
twice). A partial success names the lines of its request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from ._files import Line, ReplayFile, complete_lines, identity
from ._ledger import Ledger, Position
from ._sender import ACCEPTED, REJECTED, Answer, Sender, encode
from ._steplog import log_record, resource_of, steplog_request
from ._summary import Summary

__all__ = ["INTERRUPTED", "Stopped", "count_items", "replay_file"]

INTERRUPTED = "interrupted"

KEYS = {"traces": "resourceSpans", "metrics": "resourceMetrics", "logs": "resourceLogs"}
_ITEMS = {"traces": ("scopeSpans", "spans"), "logs": ("scopeLogs", "logRecords")}
_METRIC_SHAPES = ("gauge", "sum", "histogram", "exponentialHistogram", "summary")


class Stopped(Exception):
    """The run ends here: the destination refused us (FATAL), the collector stayed away
    (GAVE_UP), or a stop was asked for. Nothing unsettled is in the ledger."""

    def __init__(self, message: str, outcome: str) -> None:
        super().__init__(message)
        self.outcome = outcome  # FATAL, GAVE_UP or INTERRUPTED


@dataclass
class _Entry:
    line: Line
    payload: object  # the decoded batch's resource list, or a step-log log record
    items: int


def count_items(signal: str, resources: list) -> int:
    """Spans, metric data points or log records in a batch's resource list."""
    count = 0
    for resource in resources:
        if signal == "metrics":
            for scope in _list(resource, "scopeMetrics"):
                for metric in (m for m in scope.get("metrics") or [] if isinstance(m, dict)):
                    for shape in _METRIC_SHAPES:
                        if isinstance(metric.get(shape), dict):
                            count += len(_list(metric[shape], "dataPoints"))
        else:
            scopes_key, items_key = _ITEMS[signal]
            count += sum(len(_list(scope, items_key)) for scope in _list(resource, scopes_key))
    return count


def _list(container: object, key: str) -> list:
    value = container.get(key) if isinstance(container, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class _FileReplay:
    def __init__(self, file: ReplayFile, sender: Sender, ledger: Ledger, summary: Summary,
                 batch_bytes: int, stopping: Callable[[], bool]) -> None:
        self.file, self.sender, self.ledger, self.summary = file, sender, ledger, summary
        self.batch_bytes, self.stopping = batch_bytes, stopping
        self.tally = summary.tally(file.signal)
        self.resource = resource_of(file) if file.kind == "steplog" else None

    def start(self) -> Position | None:
        """Where to begin (the identity of the file, offset and line), None: nothing to do."""
        found = identity(self.file.path)
        if found is None:
            return None  # not one complete line yet
        inode, head, size = found
        known = self.ledger.position(self.file.name)
        if known is not None and known.head == head and known.offset <= size:
            self.tally.already_lines += known.line
            return Position(inode, head, known.offset, known.line)
        if known is not None:
            self.summary.note(f"{self.file.name}: not the file the ledger knows (replaced or "
                              "cut short): sent from its start")
        return Position(inode, head, 0, 0)

    def run(self) -> None:
        start = self.start()
        if start is None:
            return
        self.position = start
        self.summary.progress.start_file(self.file.name, start.offset)
        batch: list[_Entry] = []
        size = 0
        for line in complete_lines(self.file.path, start.offset, start.line):
            entry = self._decode(line)
            if entry is None:  # reported; settled after what came before it
                if batch:
                    self._flush(batch)
                    batch, size = [], 0
                self._settle(line)
                continue
            batch.append(entry)
            size += len(line.raw)
            if size >= self.batch_bytes:
                self._flush(batch)
                batch, size = [], 0
        if batch:
            self._flush(batch)

    def _decode(self, line: Line) -> _Entry | None:
        """The line's payload, or None after reporting it as not sendable."""
        if line.raw is None:
            return self._refuse(line, "longer than the reader's bound: not read, not sent")
        try:
            value = json.loads(line.raw)
        except (ValueError, RecursionError):
            return self._refuse(line, "not JSON: not sent")
        if self.file.kind == "steplog":
            if not isinstance(value, dict):
                return self._refuse(line, "not a step record (a JSON object): not sent")
            return _Entry(line, log_record(value, line.raw, self.file.name), 1)
        resources = value.get(KEYS[self.file.signal]) if isinstance(value, dict) else None
        if not isinstance(resources, list):
            return self._refuse(line, f"not an OTLP JSON {self.file.signal} batch (no "
                                      f"{KEYS[self.file.signal]} list): not sent")
        return _Entry(line, resources, count_items(self.file.signal, resources))

    def _refuse(self, line: Line, why: str) -> None:
        self.tally.rejected_lines += 1
        self.summary.problem(f"{self.file.name}:{line.number}: {why}")
        return None

    def _body(self, batch: list[_Entry]) -> bytes:
        if self.file.kind == "steplog":
            return encode(steplog_request(self.resource, [e.payload for e in batch]))
        if len(batch) == 1:
            return batch[0].line.raw  # as written
        return encode({KEYS[self.file.signal]: [r for e in batch for r in e.payload]})

    def _flush(self, batch: list[_Entry]) -> None:
        if self.stopping():
            raise Stopped(f"stopped before {self._where(batch)}", INTERRUPTED)
        answer = self.sender.send(self.file.signal, self._body(batch))
        if answer.outcome == REJECTED and len(batch) > 1:
            for entry in batch:  # one line per request: name the one at fault, send the rest
                self._settle_answer([entry], self.sender.send(self.file.signal,
                                                              self._body([entry])))
            return
        self._settle_answer(batch, answer)

    def _settle_answer(self, batch: list[_Entry], answer: Answer) -> None:
        where = self._where(batch)
        if answer.outcome == ACCEPTED:
            self.tally.sent_lines += len(batch)
            self.tally.sent_items += sum(e.items for e in batch) - answer.rejected_items
            if answer.rejected_items:
                self.tally.rejected_items += answer.rejected_items
                self.summary.problem(f"{where}: the collector rejected "
                                     f"{answer.rejected_items} of its items: {answer.message}")
        elif answer.outcome == REJECTED:
            self.tally.rejected_lines += len(batch)
            self.tally.rejected_items += sum(e.items for e in batch)
            self.summary.problem(f"{where}: rejected: {answer.message}")
        else:
            raise Stopped(f"{where}: {answer.message}", answer.outcome)
        self._settle(batch[-1].line)

    def _settle(self, line: Line) -> None:
        self.position = Position(self.position.inode, self.position.head, line.end, line.number)
        self.ledger.record(self.file.name, self.position)
        self.summary.progress.reached(self.file.name, line.end)

    def _where(self, batch: list[_Entry]) -> str:
        first, last = batch[0].line.number, batch[-1].line.number
        return f"{self.file.name}:{first}" + (f"-{last}" if last != first else "")


def replay_file(file: ReplayFile, sender: Sender, ledger: Ledger, summary: Summary,
                batch_bytes: int, stopping: Callable[[], bool]) -> None:
    """Send what of `file` is not yet settled; raises `Stopped` when the run must end."""
    _FileReplay(file, sender, ledger, summary, batch_bytes, stopping).run()

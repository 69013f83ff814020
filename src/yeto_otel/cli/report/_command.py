"""The command: `yeto-otel report DIR [-o FILE]`, its argument checks, and writing the page
(whole or not at all)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from pathlib import Path

from ...errors import UserFacingError
from ._header import skipped_records
from ._page import build_html
from ._progress import Progress
from ._telemetry import PATTERNS, Telemetry, load_telemetry

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="the directory of local telemetry files (YETO_OTEL_LOCAL_DIR)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="where to write the page (default: DIR/report.html)")


def _check_directory(directory: Path) -> None:
    if not directory.exists():
        raise UserFacingError(f"report: {directory} does not exist (give the directory the "
                              "telemetry files were written to: YETO_OTEL_LOCAL_DIR)")
    if not directory.is_dir():
        raise UserFacingError(f"report: {directory} is not a directory (give the directory "
                              "of telemetry files, not a file)")
    if not os.access(directory, os.R_OK | os.X_OK):
        raise UserFacingError(f"report: {directory} cannot be read (permission denied)")


# What the page must never be renamed over: it would replace the thing itself with a regular
# file (as root, `-o /dev/null` would break the machine; a FIFO's reader would never see it).
_NOT_A_FILE = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def _check_output(output: Path) -> None:
    """Refuse an output that exists and is not a regular file (judged by lstat: a symbolic link
    is refused whatever it points at, since the page would replace the link)."""
    try:
        mode = os.lstat(output).st_mode
    except FileNotFoundError:
        return  # a new path
    except OSError as exc:
        raise UserFacingError(f"report: cannot write {output}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise UserFacingError(f"report: -o {output} is a directory; give a file name, "
                              f"e.g. {output / 'report.html'}")
    for test, kind in _NOT_A_FILE:
        if test(mode):
            raise UserFacingError(f"report: {output} is {kind}, not a regular file; give a "
                                  "new path or a regular file to replace")
    if not stat.S_ISREG(mode):
        raise UserFacingError(f"report: {output} is not a regular file; give a new path or a "
                              "regular file to replace")


def _output_path(args: argparse.Namespace, directory: Path) -> Path:
    output = Path(args.output).expanduser() if args.output else directory / "report.html"
    _check_output(output)
    parent = output.parent if str(output.parent) else Path(".")
    if not parent.is_dir():
        raise UserFacingError(f"report: cannot write {output}: directory {parent} does not "
                              "exist")
    return output


def _nothing_usable(data: Telemetry) -> UserFacingError:
    found = sum(len(v) for v in data.files.values())
    details = []
    if data.bad_lines:
        details.append(f"{data.bad_line_count} corrupt line(s) skipped, e.g. "
                       f"{data.bad_lines[0]}")
    details += skipped_records(data)
    if data.empty_files:
        details.append(f"{len(data.empty_files)} of {found} file(s) empty")
    if data.unreadable:
        details.append("unreadable: " + "; ".join(data.unreadable[:3]))
    if data.logs:
        details.append(f"only {len(data.logs)} log record(s)")
    return UserFacingError(f"report: nothing to plot in {data.directory}: no metrics, spans "
                           f"or step records in its {found} telemetry file(s) (" +
                           "; ".join(details or ["no records"]) + ")")


def run(args: argparse.Namespace) -> int:
    directory = Path(args.directory).expanduser()
    _check_directory(directory)
    output = _output_path(args, directory)
    data = load_telemetry(directory, Progress())
    if not any(data.files.values()):
        raise UserFacingError(
            f"report: no telemetry files in {directory} (expected " +
            ", ".join(PATTERNS.values()) + "; is it the YETO_OTEL_LOCAL_DIR of a run?)")
    if not data.usable:
        raise _nothing_usable(data)
    page, _ = build_html(data)
    _write(page, output)
    _warn(data)
    print(output.resolve())
    return 0


def _write(page: str, output: Path) -> None:
    """Write through a temporary file beside `output`, renamed over it: a failed write leaves
    no half page and keeps the page that was there."""
    try:
        handle, temp = tempfile.mkstemp(prefix=".report-", suffix=".html.tmp",
                                        dir=output.parent or ".")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(page)
            os.chmod(temp, 0o644)  # mkstemp makes it 0600; a page is for others to open too
            _check_output(output)  # again: something may have been put there meanwhile
            os.replace(temp, output)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        raise UserFacingError(f"report: cannot write {output}: {exc.strerror or exc}") from None


def _warn(data: Telemetry) -> None:
    """What was skipped, on stderr too: the page is written, but not everything is in it."""
    if data.bad_lines:
        files = sorted(data.bad_files)
        print(f"yeto-otel: warning: skipped {data.bad_line_count} corrupt line(s) in "
              f"{', '.join(files)} (first: {data.bad_lines[0]}); the page lists them",
              file=sys.stderr)
    for line in skipped_records(data):
        print(f"yeto-otel: warning: {line}; the page says so too", file=sys.stderr)
    if data.unreadable:
        print(f"yeto-otel: warning: could not read {'; '.join(data.unreadable)}",
              file=sys.stderr)

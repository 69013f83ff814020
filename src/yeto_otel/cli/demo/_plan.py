"""The demo's flags as a checked `Plan`, and the room it needs (disk for the anchor file,
memory for an eager restart), all checked before anything is created."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from decimal import Decimal

from ...errors import UserFacingError
from ...proc import ProcReadError, read_kb_fields
from ...units import format_bytes
from ._anchors import FP32_BYTES, FRAGMENTS

__all__ = ["AnchorDirectory", "Plan", "RELEASE_EVERY", "make_plan", "parse_size"]

RELEASE_EVERY = 4  # the steps' sawtooth: memory held for 4 steps, then released
# The largest size a flag takes: 1 PiB is past any machine's memory or disk (the room checks
# refuse far less), and keeps every size an exact integer far inside 64 bits.
_MAX_SIZE = 2**50
# The largest seed: the anchors' generator seeds are derived from it and must stay in 64 bits.
_MAX_SEED = 2**32 - 1
# What the memory the demo holds may take of MemAvailable: the rest is for the trainer-like
# state; pushing the machine into swap or the OOM killer would end the demo, not show it.
_MEMORY_SHARE = 0.8

_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "kib": 2**10, "kb": 10**3,
    "m": 2**20, "mib": 2**20, "mb": 10**6,
    "g": 2**30, "gib": 2**30, "gb": 10**9,
    "t": 2**40, "tib": 2**40, "tb": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str, flag: str = "--size") -> int:
    """'256MiB' -> 268435456. Accepts B, KiB/MiB/GiB/TiB (also K/M/G/T), KB/MB/GB/TB."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise UserFacingError(f"{flag} {text!r} is not a size; use e.g. 64MiB, 256MiB, 1GiB "
                              "(units B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
    size = Decimal(match.group(1)) * _UNITS[unit]  # exact: no float to overflow or round
    if size > _MAX_SIZE:
        shown = text if len(text) <= 24 else text[:20] + "…"
        raise UserFacingError(f"{flag} {shown!r} is too large (at most "
                              f"{format_bytes(_MAX_SIZE)})")
    return int(size)


@dataclass(frozen=True)
class Plan:
    size: int
    shards: int
    steps: int
    step_size: int
    step_seconds: float
    seed: int
    directory: str | None
    keep: bool
    compare_eager: bool
    rank: int | None
    world_size: int | None
    json: bool


def _integer(text: str, flag: str, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise UserFacingError(f"{flag} {text!r} is not an integer") from None
    if value < minimum:
        raise UserFacingError(f"{flag} {value} is not valid: must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise UserFacingError(f"{flag} {value} is not valid: must be at most {maximum:,}")
    return value


def _anchor_shape(args: argparse.Namespace) -> tuple[int, int]:
    size = parse_size(args.size)
    shards = _integer(args.shards, "--shards", 1)
    if shards < FRAGMENTS:
        raise UserFacingError(f"--shards {shards} is too few: the demo syncs {FRAGMENTS} "
                              f"fragments, so it needs at least {FRAGMENTS} shards")
    if size < shards * FP32_BYTES:
        raise UserFacingError(f"--size {args.size} is too small for {shards:,} FP32 shards "
                              f"(at least {format_bytes(shards * FP32_BYTES)})")
    return size, shards


def _step_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise UserFacingError(f"--step-seconds {text!r} is not a number") from None
    if not (0 <= seconds <= 60):
        raise UserFacingError(f"--step-seconds {text} must be between 0 and 60")
    return seconds


def _rank_and_world(args: argparse.Namespace) -> tuple[int | None, int | None]:
    rank = _integer(args.rank, "--rank", 0) if args.rank is not None else None
    world = _integer(args.world_size, "--world-size", 1) if args.world_size is not None else None
    if rank is not None and world is not None and rank >= world:
        raise UserFacingError(f"--rank {rank} must be less than --world-size {world}")
    return rank, world


def make_plan(args: argparse.Namespace) -> Plan:
    """The flags, checked: a bad one is a `UserFacingError` before anything is created."""
    size, shards = _anchor_shape(args)
    steps = _integer(args.steps, "--steps", 0)
    step_size = parse_size(args.step_size, "--step-size")
    _check_step_memory(args.step_size, step_size)
    step_seconds = _step_seconds(args.step_seconds)
    seed = _integer(args.seed, "--seed", 0, _MAX_SEED)
    rank, world = _rank_and_world(args)
    return Plan(size=size, shards=shards, steps=steps, step_size=step_size,
                step_seconds=step_seconds, seed=seed, directory=args.dir, keep=args.keep,
                compare_eager=args.compare_eager, rank=rank, world_size=world, json=args.json)


# ---------------------------------------------------------------------------------------------
# room


def _mem_available() -> int | None:
    """MemAvailable in bytes, or None when the kernel does not say (not Linux, no /proc)."""
    try:
        return read_kb_fields("/proc/meminfo", {b"MemAvailable": "available"}).get("available")
    except ProcReadError:
        return None


def _check_step_memory(text: str, step_size: int) -> None:
    """The steps hold up to RELEASE_EVERY steps' memory at once: refuse a --step-size whose
    teeth would not fit (a failed allocation deep in the steps would be a traceback)."""
    held = step_size * RELEASE_EVERY
    available = _mem_available()
    if available is not None and held > available * _MEMORY_SHARE:
        raise UserFacingError(
            f"--step-size {text} is too large: the steps hold up to {RELEASE_EVERY} of them "
            f"({format_bytes(held)}) at once, and only {format_bytes(available)} is available; "
            "use a smaller --step-size")


def _check_room(directory: str, file_bytes: int, plan: Plan) -> None:
    try:
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        raise UserFacingError(f"--dir {directory}: {exc.strerror or exc}") from None
    needed = file_bytes * 2 + (16 << 20)  # the file and its temporary copy while it is saved
    if free < needed:
        raise UserFacingError(
            f"not enough disk space in {directory} for {format_bytes(file_bytes)} of anchors: "
            f"{format_bytes(free)} free, {format_bytes(needed)} needed; use a smaller --size or "
            "another --dir")
    if plan.compare_eager:
        available = _mem_available()
        if available is not None and file_bytes > available * _MEMORY_SHARE:
            raise UserFacingError(
                f"--compare-eager would read {format_bytes(file_bytes)} into memory but only "
                f"{format_bytes(available)} is available; use a smaller --size")


@dataclass(frozen=True)
class AnchorDirectory:
    """Where the anchor file goes: --dir (made if missing, never removed) or a temporary
    directory the demo made and removes at the end."""

    path: str
    made: bool

    @classmethod
    def prepare(cls, plan: Plan, file_bytes: int) -> "AnchorDirectory":
        """The directory, checked for room for `file_bytes`; a temporary one that lacks room is
        removed before the error is raised, so a refused run leaves nothing behind."""
        directory = cls._user_directory(plan.directory) if plan.directory is not None else \
            cls(tempfile.mkdtemp(prefix="yeto-demo-"), made=True)
        try:
            _check_room(directory.path, file_bytes, plan)
        except UserFacingError:
            directory.remove()
            raise
        return directory

    @classmethod
    def _user_directory(cls, given: str) -> "AnchorDirectory":
        path = os.path.abspath(os.path.expanduser(given))
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise UserFacingError(f"--dir {given}: {exc.strerror or exc}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserFacingError(f"--dir {given}: not writable")
        return cls(path, made=False)

    def anchor_path(self, rank: int) -> str:
        return os.path.join(self.path, f"anchors-rank{rank}.pt")

    def remove(self) -> None:
        """Remove the directory if the demo made it (a user's --dir is theirs to keep)."""
        if self.made:
            shutil.rmtree(self.path, ignore_errors=True)

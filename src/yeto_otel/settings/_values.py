"""The value side of the settings: what each setting accepts and how its text is parsed.

Pure functions of a string; nothing here reads the environment (that is `yeto_otel.settings`).
A parser raises `ValueError` with what it expected; `settings.parse_setting` turns that into a
`SettingsError` that names the setting.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

class SettingsError(ValueError):
    """A setting has a value we cannot use. The message names it, the value and what is accepted."""

    def __init__(self, name: str, value: str, accepted: str, why: str | None = None):
        self.name = name
        self.value = value
        self.accepted = accepted
        detail = f" ({why})" if why else ""
        super().__init__(f"{name}={value!r} is not valid{detail}; accepted: {accepted}")


@dataclass(frozen=True)
class Setting:
    name: str
    default: str | None
    accepted: str
    description: str
    parse: Callable[[str], object]


def parse_switch(value: str) -> bool:
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError("expected 0 or 1")


CALLABLE_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

# The named sources of YETO_OTEL_HOST_ALLOCATOR; anything else must be `module:function`.
HOST_ALLOCATOR_CHOICES = ("auto", "cuda", "npu", "none")
HOST_ALLOCATOR_ACCEPTED = ", ".join(f"`{c}`" for c in HOST_ALLOCATOR_CHOICES) + \
    ", or `module:function`"


def parse_allocator(value: str) -> str:
    if value in HOST_ALLOCATOR_CHOICES or CALLABLE_REF.match(value):
        return value
    raise ValueError("expected " + HOST_ALLOCATOR_ACCEPTED.replace("`", ""))


# Floating dtypes an anchor may be stored in, by torch's own names (torch.float32 -> "float32").
ANCHOR_DTYPES = ("float32", "bfloat16", "float16", "float64")


def parse_anchor_dtype(value: str) -> str | None:
    if value == "":
        return None
    if value in ANCHOR_DTYPES:
        return value
    raise ValueError("not an anchor dtype")


def parse_directory(value: str) -> str:
    if not value:
        raise ValueError("expected a directory path")
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def parse_lock_dir(value: str) -> str:
    # Every process of an election must name the same directory: a relative path would depend
    # on each one's working directory.
    value = parse_directory(value)
    if not value.startswith("/"):
        raise ValueError("expected an absolute directory path")
    return value


def parse_node_metrics(value: str) -> str:
    if value in ("auto", "on", "off"):
        return value
    raise ValueError("expected auto, on or off")


ANCHOR_READAHEAD = ("anchor", "kernel", "off")


def parse_anchor_readahead(value: str) -> str:
    if value in ANCHOR_READAHEAD:
        return value
    raise ValueError("expected anchor, kernel or off")


# torch.distributed hands ranks and world sizes to C++ as 32-bit ints (a larger RANK fails
# there), and the resource attributes go out as OTLP int64: 2^31 - 1 bounds both.
RANK_LIMIT = 2 ** 31 - 1


def parse_rank(value: str) -> int | None:
    if value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise ValueError("expected a non-negative integer")
    number = int(value) if len(value) <= 12 else RANK_LIMIT + 1  # no 4000-digit int()
    if number > RANK_LIMIT:
        raise ValueError(f"at most {RANK_LIMIT}, what torch.distributed accepts")
    return number


def parse_positive_rank(value: str) -> int | None:
    number = parse_rank(value)
    if number == 0:
        raise ValueError("must be at least 1")
    return number


def parse_on_off(value: str) -> bool:
    if value in ("on", "off"):
        return value == "on"
    raise ValueError("expected on or off")


IDENTITY_OWNER = "YETO_OTEL_IDENTITY_OWNER"

JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def parse_job_id(value: str) -> str | None:
    # It becomes part of service.instance.id and of the local files' names.
    if value == "":
        return None
    if not JOB_ID.fullmatch(value):
        raise ValueError("expected 1 to 128 letters, digits, '.', '_' or '-'")
    return value


# A rank whose number is pending (Lightning's launcher beyond node 0) owns its identity under
# its local rank: `local-<LOCAL_RANK>:<pid>`.
PENDING_OWNER_PREFIX = "local-"


def parse_identity_owner(value: str) -> tuple[int | str | None, int] | None:
    """`<RANK>:<pid>` (`-:<pid>` without a rank, `local-<LOCAL_RANK>:<pid>` for a rank whose
    number is pending): the process that reports under the identity, and its key."""
    if value == "":
        return None
    key, sep, pid = value.rpartition(":")
    pending = key.startswith(PENDING_OWNER_PREFIX) and key[len(PENDING_OWNER_PREFIX):].isdigit()
    if not sep or not pid.isdigit() or not (key == "-" or key.isdigit() or pending):
        raise ValueError("expected <RANK>:<pid>, -:<pid> or local-<LOCAL_RANK>:<pid>, as "
                         "yeto-otel writes it")
    return (None if key == "-" else key if pending else int(key)), int(pid)


# How long one host-allocator query may take before it is abandoned for that collection.
ALLOCATOR_TIMEOUT_LIMIT_MS = 60_000


def parse_allocator_timeout(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or len(value) > 6:
        raise ValueError("expected a whole number of milliseconds")
    number = int(value)
    if not 1 <= number <= ALLOCATOR_TIMEOUT_LIMIT_MS:
        raise ValueError(f"must be 1 to {ALLOCATOR_TIMEOUT_LIMIT_MS}")
    return number


# How long a stopping process may wait for its last export, in all. Launchers give a stopping
# rank about 30 s before SIGKILL (torchrun, Kubernetes, Slurm): a longer wait is never served.
EXIT_FLUSH_TIMEOUT_LIMIT_MS = 30_000


def parse_exit_flush_timeout(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or len(value) > 6:
        raise ValueError("expected a whole number of milliseconds")
    number = int(value)
    if number > EXIT_FLUSH_TIMEOUT_LIMIT_MS:
        raise ValueError(f"must be 0 to {EXIT_FLUSH_TIMEOUT_LIMIT_MS}")
    return number


# The share of one core that reading /proc/self/smaps_rollup may take, in percent. Its cost
# grows with resident memory (it walks every page-table entry), so it is read only once enough
# time has passed since the last read; `always` reads it on every collection (small processes).
SMAPS_BUDGET_ALWAYS = "always"


def parse_smaps_budget(value: str) -> float:
    """Percent of one core, 0 to 100 (`0`: never read), or `always` (math.inf: every time)."""
    if value == SMAPS_BUDGET_ALWAYS:
        return math.inf
    if not value.isascii() or len(value) > 12:
        raise ValueError("expected a number of percent or always")
    try:
        number = float(value)
    except ValueError:
        raise ValueError("expected a number of percent or always") from None
    if not 0 <= number <= 100:  # also refuses nan and inf
        raise ValueError("must be 0 to 100 (percent of one core)")
    return number


# The SDK's own durations and sizes. It reads them while it sets up, after start-up checks,
# where a value it cannot use is a traceback and a run without that signal (0, a negative
# number) or a silent fallback (text, an empty value). A duration above 2^31 - 1 ms (24 days)
# overflows the wait of the thread that exports and stops it without a word; nan never exports.
SDK_NUMBER_LIMIT = 2 ** 31 - 1


def parse_sdk_duration(value: str) -> float:
    """A duration the SDK reads with float(): finite, above zero, not absurdly long."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError("not a number") from None
    if not 0 < number <= SDK_NUMBER_LIMIT:  # also refuses nan and inf
        raise ValueError(f"must be above 0 and at most {SDK_NUMBER_LIMIT}")
    return number


def parse_sdk_whole(value: str) -> int:
    """A duration or size the SDK reads with int(): a whole number from 1."""
    try:
        number = int(value) if len(value) <= 12 else SDK_NUMBER_LIMIT + 1
    except ValueError:
        raise ValueError("not a whole number") from None
    if not 1 <= number <= SDK_NUMBER_LIMIT:
        raise ValueError(f"must be 1 to {SDK_NUMBER_LIMIT}")
    return number


_DURATION = "a number of milliseconds above 0"
_WHOLE_MS = "a whole number of milliseconds from 1"
_SIZE = "a whole number from 1"
_SECONDS = "a number of seconds above 0"

# name -> (accepted, parser): the standard variables checked at start (see settings).
SDK_VARIABLES: dict[str, tuple[str, Callable[[str], object]]] = {
    "OTEL_METRIC_EXPORT_INTERVAL": (_DURATION, parse_sdk_duration),
    "OTEL_METRIC_EXPORT_TIMEOUT": (_DURATION, parse_sdk_duration),
    "OTEL_BSP_SCHEDULE_DELAY": (_WHOLE_MS, parse_sdk_whole),
    "OTEL_BSP_EXPORT_TIMEOUT": (_WHOLE_MS, parse_sdk_whole),
    "OTEL_BSP_MAX_QUEUE_SIZE": (_SIZE, parse_sdk_whole),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": (_SIZE, parse_sdk_whole),
    "OTEL_BLRP_SCHEDULE_DELAY": (_WHOLE_MS, parse_sdk_whole),
    "OTEL_BLRP_EXPORT_TIMEOUT": (_WHOLE_MS, parse_sdk_whole),
    "OTEL_BLRP_MAX_QUEUE_SIZE": (_SIZE, parse_sdk_whole),
    "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": (_SIZE, parse_sdk_whole),
    "OTEL_EXPORTER_OTLP_TIMEOUT": (_SECONDS, parse_sdk_duration),
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": (_SECONDS, parse_sdk_duration),
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": (_SECONDS, parse_sdk_duration),
    "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": (_SECONDS, parse_sdk_duration),
}

# OTEL_EXPORTER_OTLP_PROTOCOL -> the exporter `otlp` means with it (the SDK's own mapping).
OTLP_EXPORTER_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}

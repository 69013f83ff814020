"""The value side of the settings: what each setting accepts and how its text is parsed.

Pure functions of a string; nothing here reads the environment (that is `yeto_otel.settings`).
A parser raises `ValueError` with what it expected; `settings.parse_setting` turns that into a
`SettingsError` that names the setting.
"""

from __future__ import annotations

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


def parse_node_metrics(value: str) -> str:
    if value in ("auto", "on", "off"):
        return value
    raise ValueError("expected auto, on or off")


def parse_rank(value: str) -> int | None:
    if value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise ValueError("expected a non-negative integer")
    return int(value)


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


def parse_identity_owner(value: str) -> tuple[int | None, int] | None:
    """`<RANK>:<pid>` (`-:<pid>` without RANK): the process that reports under the identity."""
    if value == "":
        return None
    rank, sep, pid = value.partition(":")
    if not sep or not pid.isdigit() or not (rank == "-" or rank.isdigit()):
        raise ValueError("expected <RANK>:<pid> or -:<pid>, as yeto-otel writes it")
    return (None if rank == "-" else int(rank)), int(pid)

"""Every setting yeto-otel reads, read and validated in one place.

This room is the only code that reads (or writes) the environment. Every other module
receives values: internal code is given a `Settings` or plain arguments, and the public entry
points (the instrumentors, `add_census_to_step_log`, `save_resume_anchors`,
`load_resume_anchors`, the distro and the command line) take their values as arguments and
fall back to the process's settings only when an argument is not given. The settings are one
table (`_table`, parsers in `_values`), also the source of `docs/settings.md`; `_load` reads
them (once per process for `current_settings`); `_otel_variables` holds the standard SDK
variables the distro reads and fills in.
"""

from . import _load, _otel_variables
from ._load import *  # noqa: F403  (the face re-exports each module's __all__)
from ._otel_variables import *  # noqa: F403
from ._table import SETTINGS
from ._values import (ANCHOR_DTYPES, ANCHOR_READAHEAD, HOST_ALLOCATOR_ACCEPTED,
                      HOST_ALLOCATOR_CHOICES, IDENTITY_OWNER, PENDING_OWNER_PREFIX, Setting,
                      SettingsError, parse_sdk_duration)

__all__ = [
    "ANCHOR_DTYPES",
    "ANCHOR_READAHEAD",
    "HOST_ALLOCATOR_ACCEPTED",
    "HOST_ALLOCATOR_CHOICES",
    "IDENTITY_OWNER",
    "PENDING_OWNER_PREFIX",
    "SETTINGS",
    "Setting",
    "SettingsError",
    "parse_sdk_duration",
    *_load.__all__,
    *_otel_variables.__all__,
]

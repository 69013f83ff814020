"""OpenTelemetry plumbing: the distro and configurator `opentelemetry-instrument` loads, which
process of a job reports and under what identity (ranks, DataLoader workers; launchers and
other children stay silent and untouched), what happens when another configurator set the
process up, the last export when a reporting process stops (signals, exit),
exporters that send only from their own process, a pipeline of a process's own for a
DataLoader worker, the embedded default (local OTLP JSON files, written whole lines at a time
through a bounded backlog) and the reader of those files, and
`configure_telemetry` for programs that set telemetry up in code."""

from . import _configurator, _exit_flush, _foreign, _json_lines, _line_writer, _local_files
from . import _otlp_json, _owner_only, _pipeline, _process, _resource, _setup, _start
from . import _write_faults
from ._configurator import *  # noqa: F403  (the face re-exports each module's __all__)
from ._distro import YetoDistro
from ._exit_flush import *  # noqa: F403
from ._foreign import *  # noqa: F403
from ._json_lines import *  # noqa: F403
from ._line_writer import *  # noqa: F403
from ._local_files import *  # noqa: F403
from ._otlp_json import *  # noqa: F403
from ._otlp_json import CUMULATIVE, DELTA
from ._owner_only import *  # noqa: F403
from ._pipeline import *  # noqa: F403
from ._process import *  # noqa: F403
from ._resource import *  # noqa: F403
from ._setup import *  # noqa: F403
from ._start import *  # noqa: F403
from ._write_faults import *  # noqa: F403

__all__ = [
    "CUMULATIVE",
    "DELTA",
    "YetoDistro",
    *_configurator.__all__,
    *_exit_flush.__all__,
    *_foreign.__all__,
    *_json_lines.__all__,
    *_line_writer.__all__,
    *_local_files.__all__,
    *_otlp_json.__all__,
    *_owner_only.__all__,
    *_pipeline.__all__,
    *_process.__all__,
    *_resource.__all__,
    *_setup.__all__,
    *_start.__all__,
    *_write_faults.__all__,
]

"""OpenTelemetry plumbing: the distro and configurator `opentelemetry-instrument` loads, which
process of a job reports and under what identity (ranks, DataLoader workers; launchers and
other children stay silent), exporters that send only from their own process, a pipeline of a
process's own for a DataLoader worker, the embedded default (local OTLP JSON files) and the
reader of those files, and `configure_telemetry` for programs that set telemetry up in code."""

from . import _configurator, _local_files, _otlp_json, _owner_only, _pipeline, _process
from . import _resource, _setup
from ._configurator import *  # noqa: F403  (the face re-exports each module's __all__)
from ._distro import YetoDistro
from ._local_files import *  # noqa: F403
from ._otlp_json import *  # noqa: F403
from ._otlp_json import CUMULATIVE, DELTA
from ._owner_only import *  # noqa: F403
from ._pipeline import *  # noqa: F403
from ._process import *  # noqa: F403
from ._resource import *  # noqa: F403
from ._setup import *  # noqa: F403

__all__ = [
    "CUMULATIVE",
    "DELTA",
    "YetoDistro",
    *_configurator.__all__,
    *_local_files.__all__,
    *_otlp_json.__all__,
    *_owner_only.__all__,
    *_pipeline.__all__,
    *_process.__all__,
    *_resource.__all__,
    *_setup.__all__,
]

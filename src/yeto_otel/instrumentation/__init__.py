"""OpenTelemetry instrumentors shipped by yeto-otel (loaded by `opentelemetry-instrument`
through the `opentelemetry_instrumentor` entry points `yeto_host_memory`, `yeto_torch_load`,
`yeto_safetensors`, `yeto_dcp`, `yeto_dataloader_workers` and `yeto_rank_exits`), and the post-import hook that
patches torch, torch.distributed.checkpoint and safetensors only once the program imports them.
"""

from ._dataloader import DataLoaderWorkerInstrumentor, WorkerTelemetry
from ._dcp import DcpInstrumentor
from ._host_memory import METER_NAME, HostMemoryInstrumentor
from ._post_import import ImportWatch, when_imported
from ._rank_exits import RankExitInstrumentor
from ._safetensors import SafetensorsInstrumentor
from ._torch_load import TorchLoadInstrumentor

__all__ = ["METER_NAME", "DataLoaderWorkerInstrumentor", "DcpInstrumentor",
           "HostMemoryInstrumentor", "ImportWatch", "RankExitInstrumentor",
           "SafetensorsInstrumentor", "TorchLoadInstrumentor", "WorkerTelemetry", "when_imported"]

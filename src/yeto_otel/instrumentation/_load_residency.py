"""What one safetensors load cost this process: the file's mappings (mapped, touched) and the
growth of its anonymous memory, measured the way the anchor spans measure theirs.

Measuring never fails the load: a reading that cannot be taken (no /proc, a probe error) is
left out of the span, the span says why, and the first failure of each kind is logged once
per process.
"""

from __future__ import annotations

import os
from typing import Any

from .. import names
from ..proc import ResidencyProbe, read_anonymous_bytes
from ._load_tracing import OnceLog

__all__ = ["LoadResidency", "file_attributes", "log_once"]

log_once = OnceLog("yeto_otel.safetensors", "safetensors spans",
                   names.SAFETENSORS_RESIDENCY_ERROR.name)


def file_attributes(filename: Any, device: Any, backend: Any) -> tuple[dict, str | None]:
    """(span attributes, absolute path) for a load of `filename`; never raises."""
    attributes: dict[str, Any] = {}
    path = None
    try:
        attributes[names.SAFETENSORS_DEVICE.name] = str(device)
        attributes[names.SAFETENSORS_BACKEND.name] = str(backend)
        if isinstance(filename, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(filename))
            attributes[names.SAFETENSORS_PATH.name] = path
            attributes[names.SAFETENSORS_FILE_SIZE.name] = os.stat(path).st_size
    except (OSError, TypeError, ValueError):
        pass  # safetensors will say what is wrong with the file
    except Exception as exc:  # a device whose str() fails...: never into the load
        log_once(type(exc).__name__, f"attributes not recorded: {type(exc).__name__}: {exc}")
    return attributes, path


class LoadResidency:
    """Readings taken when a load starts (`__init__`) and when its span ends (`finish`)."""

    def __init__(self, path: str | None):
        self.path = path
        self._errors: list[str] = []
        self._anonymous_before = self._anonymous()

    def _anonymous(self) -> int | None:
        try:
            return read_anonymous_bytes()
        except Exception as exc:  # ProcReadError, or anything else: the load goes on
            self._note("anonymous", f"{type(exc).__name__}: {exc}")
            return None

    def _note(self, kind: str, error: str) -> None:
        self._errors.append(error)
        log_once(kind, f"cannot measure {kind} memory: {error}")

    def finish(self, span, **counts: int) -> None:
        """Set the readings (and `counts`, attribute name -> value) on `span`; never raises."""
        try:
            attributes = dict(counts)
            if self.path is not None:
                attributes.update(self._mapping())
            if self._anonymous_before is not None:
                now = self._anonymous()
                if now is not None:
                    attributes[names.SAFETENSORS_ANONYMOUS_DELTA.name] = \
                        now - self._anonymous_before
            if self._errors:
                attributes[names.SAFETENSORS_RESIDENCY_ERROR.name] = "; ".join(self._errors)
            span.set_attributes(attributes)
        except Exception as exc:
            log_once("finish", f"readings not recorded: {type(exc).__name__}: {exc}")

    def _mapping(self) -> dict[str, int]:
        probe = ResidencyProbe(self.path)
        residency = probe.measure()
        if residency is None:
            self._note("mapped", probe.error or "no reading")
            return {}
        return {names.SAFETENSORS_BYTES_MAPPED.name: residency.bytes_mapped,
                names.SAFETENSORS_BYTES_TOUCHED.name: residency.bytes_touched}

"""The metrics a resume records: what the last anchor resume of this process mapped and touched.

The same numbers are attributes of the `yeto.resume.anchors` span; as metrics they reach
Prometheus too, so a dashboard can put every rank's last resume side by side with its memory
whatever tracing backend is in use. `docs/metrics.md` is generated from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _spans as span_table

__all__ = ["LOAD_MODE_ATTRIBUTE", "RESUME_BYTES_MAPPED", "RESUME_BYTES_TOUCHED", "RESUME_METRICS",
           "ResumeMetric"]


@dataclass(frozen=True)
class ResumeMetric:
    name: str
    unit: str
    description: str
    instrument: str = "Gauge"  # synchronous: set once per resume, exported until the next one


# The one attribute on every point: mapped and eager resumes are read differently.
LOAD_MODE_ATTRIBUTE = span_table.ANCHORS_LOAD_MODE.name

RESUME_BYTES_MAPPED = ResumeMetric(
    "yeto.resume.anchors.bytes_mapped", "By",
    "Bytes of the anchor file the last resume of this process mapped (0 when read eagerly); "
    "set when the resume's block ends. Same as the span attribute "
    f"`{span_table.ANCHORS_BYTES_MAPPED.name}`.")
RESUME_BYTES_TOUCHED = ResumeMetric(
    "yeto.resume.anchors.bytes_touched", "By",
    "Bytes of the mapping resident in this process when the last resume's block ended "
    "(eager: the bytes read). Same as the span attribute "
    f"`{span_table.ANCHORS_BYTES_TOUCHED.name}`.")

RESUME_METRICS: tuple[ResumeMetric, ...] = (RESUME_BYTES_MAPPED, RESUME_BYTES_TOUCHED)

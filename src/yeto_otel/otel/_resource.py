"""Rank identity as resource attributes.

Every rank needs its own `service.instance.id`: Prometheus derives `instance` from it, and
two ranks sharing one would send clashing samples that are rejected. The id is stable across
restarts of the same rank (host + global rank), so a restart shows as a drop in one series,
not as a new series.
"""

from __future__ import annotations

import os
import socket

from opentelemetry.sdk.resources import OTELResourceDetector, Resource, ResourceDetector

from ..settings import Settings, load_settings

__all__ = ["YetoResourceDetector", "rank_resource_attributes", "user_resource_attributes"]


def rank_resource_attributes(settings: Settings, *, hostname: str | None = None,
                             pid: int | None = None) -> dict[str, str | int]:
    host = hostname or socket.gethostname()
    if settings.rank is not None:
        instance = f"{host}/rank-{settings.rank}"
    else:
        instance = f"{host}/pid-{pid or os.getpid()}"
    attributes: dict[str, str | int] = {"host.name": host, "service.instance.id": instance}
    for key, value in (("yeto.rank", settings.rank), ("yeto.local_rank", settings.local_rank),
                       ("yeto.world_size", settings.world_size)):
        if value is not None:
            attributes[key] = value
    return attributes


def user_resource_attributes() -> dict:
    """What the user set through OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME; theirs win."""
    return dict(OTELResourceDetector().detect().attributes)


class YetoResourceDetector(ResourceDetector):
    """For SDK set-ups other than ours: `OTEL_EXPERIMENTAL_RESOURCE_DETECTORS=yeto,otel`
    (listed first, so the user's own attributes override ours)."""

    def detect(self) -> Resource:
        return Resource(rank_resource_attributes(load_settings()))

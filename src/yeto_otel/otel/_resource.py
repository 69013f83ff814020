"""Rank identity as resource attributes.

Every rank needs its own `service.instance.id`: Prometheus derives `instance` from it, and
two ranks sharing one would send clashing samples that are rejected. The id is stable across
restarts of the same rank (host + global rank), so a restart shows as a drop in one series,
not as a new series.
"""

from __future__ import annotations

import os
import socket

from opentelemetry.sdk.resources import (HOST_NAME, SERVICE_INSTANCE_ID, OTELResourceDetector,
                                         Resource, ResourceDetector)

from ..settings import Settings, load_settings

__all__ = ["LOCAL_RANK_ATTRIBUTE", "RANK_ATTRIBUTE", "WORLD_SIZE_ATTRIBUTE", "YetoResourceDetector",
           "rank_resource_attributes", "user_resource_attributes"]

# The rank's place in the job, next to the standard `host.name` and `service.instance.id`.
RANK_ATTRIBUTE = "yeto.rank"
LOCAL_RANK_ATTRIBUTE = "yeto.local_rank"
WORLD_SIZE_ATTRIBUTE = "yeto.world_size"


def rank_resource_attributes(settings: Settings, *, hostname: str | None = None,
                             pid: int | None = None) -> dict[str, str | int]:
    host = hostname or socket.gethostname()
    if settings.rank is not None:
        instance = f"{host}/rank-{settings.rank}"
    else:
        instance = f"{host}/pid-{pid or os.getpid()}"
    attributes: dict[str, str | int] = {HOST_NAME: host, SERVICE_INSTANCE_ID: instance}
    for key, value in ((RANK_ATTRIBUTE, settings.rank),
                       (LOCAL_RANK_ATTRIBUTE, settings.local_rank),
                       (WORLD_SIZE_ATTRIBUTE, settings.world_size)):
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

"""The names other tools depend on: every span, span attribute and event (`SPANS`), the
resume metrics, and the names all metrics get in Prometheus.

Dashboards, alert rules, trace queries and users' code use these names, so code takes them
from here (and the census table, `yeto_otel.census`) and never spells them; `docs/spans.md`
and `docs/metrics.md` are generated from the same tables.
"""

from . import _prometheus, _resume_metrics, _spans
from ._prometheus import *  # noqa: F403  (the face re-exports each module's __all__)
from ._resume_metrics import *  # noqa: F403
from ._spans import *  # noqa: F403

__all__ = [*_spans.__all__, *_resume_metrics.__all__, *_prometheus.__all__]

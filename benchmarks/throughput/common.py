"""What the orchestrator and the load generators share: constants, the error, the local stack."""

from __future__ import annotations

import os
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
ROOT = BENCHMARKS.parent
COLLECTOR_DIR = ROOT / "collector"
# The entry script: load generators and the shape capture are this script with hidden flags.
ENTRY = BENCHMARKS / "agent_throughput.py"

sys.path.insert(0, str(COLLECTOR_DIR))
import stack as stack_module  # noqa: E402  (collector/stack.py: the local stack)

RANKS_PER_HOST = 8
FRAGMENTS = 8
SERVICE_NAME = "yeto-bench-trainer"
IDLE_SETTLE_S = 5.0
MiB = 1 << 20

# A CUDA build's host allocator stats (`.freed` > 0, so every `.current` is a gauge).
ALLOCATOR_REF = "yeto_otel.testing:realistic"

__all__ = ["ALLOCATOR_REF", "COLLECTOR_DIR", "ENTRY", "FRAGMENTS", "IDLE_SETTLE_S", "MiB",
           "RANKS_PER_HOST", "ROOT", "SERVICE_NAME", "BenchError", "child_env", "stack_module"]


class BenchError(RuntimeError):
    pass


def child_env() -> dict[str, str]:
    """The environment of a child: without OTEL_* and YETO_* (each rank is configured in code)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "YETO_"))}

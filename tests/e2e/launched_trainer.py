"""A rank as the launcher tests start it (tests/e2e/test_slurm.py, test_mpi.py), under
`opentelemetry-instrument`: it runs a moment, long enough for the census to export a few
times, and writes <out dir>/<pid>.json with the launcher variables it was given.

argv: <out dir> [seconds, default 1.5]
"""

import json
import os
import sys
import time

LAUNCHER_PREFIXES = ("SLURM_", "OMPI_COMM_WORLD_", "PMI_", "PMIX_RANK", "MPI_LOCALRANKID")
LAUNCHER_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK", "YETO_OTEL_IDENTITY_OWNER")


def main() -> None:
    out, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
    given = {k: v for k, v in os.environ.items()
             if k.startswith(LAUNCHER_PREFIXES) or k in LAUNCHER_NAMES}
    with open(os.path.join(out, f"{os.getpid()}.json"), "w") as f:
        json.dump({"pid": os.getpid(), "env": given}, f)


if __name__ == "__main__":
    main()

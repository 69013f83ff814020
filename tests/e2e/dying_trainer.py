"""A trainer that the kernel OOM-kills in a chosen phase (run under `opentelemetry-instrument`,
inside a memory cgroup of the test's, tests/e2e/test_oom_kills.py).

    python dying_trainer.py <phase> <step> <work dir>

It logs steps 0..<step> (`add_census_to_step_log`), then, at <step>, grows its anonymous memory
until the kernel kills it:
- `step`: in the step itself;
- `resume`: inside a mapped restart (`load_resume_anchors` of <work dir>/anchors.pt), in the
  catch-up, as `global_new + (local - anchor)` does;
- `dcp_save`: inside `torch.distributed.checkpoint.save`, while the writer serializes an item.
`job` (under torchrun): rank 1 is killed in `step` (it asks the kernel to pick it first: a
torchrun launcher that imported torch holds more memory than a rank), every other rank steps on
(`wait`) until torchrun stops it. With TORCHELASTIC_RESTART_COUNT above 0 (a restart by
torchrun) it logs one step and exits.
"""

from __future__ import annotations

import os
import sys
import time

from yeto_otel.census import add_census_to_step_log

MiB = 1 << 20


def grow_until_killed() -> None:
    held = []
    while True:
        chunk = bytearray(32 * MiB)
        for i in range(0, len(chunk), 4096):
            chunk[i] = 1
        held.append(chunk)


class Hog:
    """An item whose serialization grows without end (a state dict entry that pickles huge)."""

    def __reduce__(self):
        grow_until_killed()


def main() -> None:
    phase, stop, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if phase == "job":
        phase = "step" if os.environ["RANK"] == "1" else "wait"
        if phase == "step":
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
    if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
        add_census_to_step_log({"step": stop + 1})
        return
    for step in range(stop + 1):
        add_census_to_step_log({"step": step})
        time.sleep(0.01)
    print("at step", stop, flush=True)
    if phase == "step":
        grow_until_killed()
    elif phase == "resume":
        from yeto_otel.anchors import load_resume_anchors
        with load_resume_anchors(os.path.join(work, "anchors.pt")) as anchors:
            grow_until_killed()
            print(anchors)
    elif phase == "dcp_save":
        import torch
        import torch.distributed.checkpoint as dcp
        dcp.save({"w": torch.ones(1024), "hog": Hog()}, checkpoint_id=os.path.join(work, "ckpt"))
    elif phase == "wait":  # for the other rank of a job: steps until it is stopped
        step = stop
        while True:
            step += 1
            add_census_to_step_log({"step": step})
            time.sleep(0.05)
    raise SystemExit(f"not killed in phase {phase}")


if __name__ == "__main__":
    main()

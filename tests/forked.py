"""Run a function in a forked child of the test process and bring its result back: what a
DataLoader worker under fork, or any forked helper of a rank, would see."""

from __future__ import annotations

import os
import pickle
import traceback


def in_fork(fn, *args):
    """`fn(*args)` in a forked child; its return value (pickled), or its exception re-raised
    here as AssertionError with the child's traceback."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        os.close(read_end)
        try:
            payload = pickle.dumps(("ok", fn(*args)))
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as result:
        data = result.read()
    os.waitpid(pid, 0)
    status, value = pickle.loads(data)
    if status == "error":
        raise AssertionError(f"in the forked child:\n{value}")
    return value

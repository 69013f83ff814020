"""A duty that exactly one process at a time holds: "observe the node", "observe this cgroup".

Several processes share one thing to report (the 8 ranks of a host share its memory and,
often, a memory cgroup). Each asks `Duty(key).held()` at every collection; the first to take
a non-blocking exclusive `flock` on a lock file named from a hash of `key` holds the duty until
it exits. The kernel drops an flock when its last descriptor closes, so a holder that dies in
any way (SIGKILL and OOM kill included) frees the duty, and another process takes it at its
next `held()` call. There is no lease to renew and no stale lock to clean up.

Why an flock file in /dev/shm by default (`YETO_OTEL_LOCK_DIR` moves it):
- the ranks of a pod share /dev/shm (one IPC namespace for its containers), and so do the
  processes of a host outside containers, which is exactly the set that must elect one;
- it is a tmpfs, writable even where the root filesystem or /tmp is read-only, and nothing
  is written to a disk;
- a lock directory is something an operator or a test can point elsewhere (to give a job
  an election of its own), which an abstract socket name in the network namespace is not.

Elections are per user. /dev/shm is writable by everyone and the files' names are predictable,
so the lock files live in `<lock dir>/yeto-otel-<euid>/`, a directory only this user can enter
(0700, its owner and mode checked), and are opened non-blocking and checked to be regular files
of this user (`_lock_files`). No other user can plant a file that hangs the census (a FIFO) or
take the duty by holding a lock of ours; in exchange, two users' jobs on one host each elect a
reporter of their own, and both report the node. Anything foreign found there is an error like
any other below, and the node's fallback rule applies (`NodeDuty`).

Fork: a child inherits its parent's descriptor and so its flock. A duty belongs to the
process that took it: in a forked child (a DataLoader worker) `held()` is False and the
inherited descriptor is closed, so it never keeps a dead parent's duty alive either. Exec'd
children never get the descriptor (`O_CLOEXEC`).

`held()` never raises: an error (no lock directory, no permission, no descriptor left, something
foreign at a lock path) means "not held"; it is counted in the ledger under `DUTY_ERROR_SOURCE`
on every call and logged once. The next call looks again, so once the foreign thing is gone
(or the directory is made), the election runs as usual.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import weakref

from ._fault_ledger import FaultLedger
from ._lock_files import ForeignLockPath, open_lock_file, private_lock_dir

__all__ = ["DEFAULT_LOCK_DIR", "DUTY_ERROR_SOURCE", "Duty"]

DEFAULT_LOCK_DIR = "/dev/shm"
DUTY_ERROR_SOURCE = "duty"  # the `source` attribute of `yeto.census.errors` for lock failures

_FILE_PREFIX = "yeto-otel-duty-"
_pid = os.getpid()  # this process's pid, kept current across forks without a syscall per call
_duties: "weakref.WeakSet[Duty]" = weakref.WeakSet()


class Duty:
    """Held by at most one live process per (`key`, `directory`) at a time."""

    def __init__(self, key: str, *, directory: str = DEFAULT_LOCK_DIR,
                 ledger: FaultLedger | None = None):
        self.key = key
        self._euid = os.geteuid()  # whose election this is: the owner its files must have
        self.directory = private_lock_dir(directory, self._euid)
        self._file_name = _FILE_PREFIX + _digest(key) + ".lock"
        self.path = os.path.join(self.directory, self._file_name)
        self.ledger = ledger or FaultLedger()
        self._owner_pid = _pid  # the process this duty belongs to
        self._fd = -1
        self._held = False
        self._failed = False
        self._lock = threading.Lock()  # two threads of the process collecting at once
        _duties.add(self)

    @property
    def failed(self) -> bool:
        """True when the last attempt to take the duty failed with an error (not because
        another process holds it): callers may fall back to a rule of their own."""
        return self._failed

    def held(self) -> bool:
        if self._held:
            return True  # nothing to do while held: the kernel keeps it until we exit
        if self._owner_pid != _pid:
            return False  # a forked child: the duty is its parent's
        with self._lock:
            return self._held or self._try_take()

    def _try_take(self) -> bool:
        try:
            if self._fd < 0:
                self._fd = open_lock_file(self.directory, self._file_name, self._euid)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._failed = False
            return False  # another process holds it
        except ForeignLockPath as exc:
            self._failed = True
            self.ledger.record(DUTY_ERROR_SOURCE, f"cannot take the duty {self.key!r}: {exc}",
                               kind=self.key)
            return False
        except Exception as exc:  # an error must never reach the trainer: not held
            self._failed = True
            self.ledger.record(DUTY_ERROR_SOURCE, f"cannot take the duty {self.key!r} "
                               f"with lock file {self.path}: {type(exc).__name__}: {exc}",
                               kind=self.key)
            return False
        self._failed = False
        self._held = True
        return True

    def close(self) -> None:
        """Give the duty up now (another process takes it at its next call); `held()` takes it
        again if it is free."""
        with self._lock:
            self._close_fd()

    def __del__(self) -> None:
        try:
            self._close_fd()
        except Exception:  # at interpreter exit the os module may be gone: the kernel closes it
            pass

    def _close_fd(self) -> None:
        # Close, never unlock: in a forked child, LOCK_UN would free the parent's lock too.
        self._held = False
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def _forget_in_child(self) -> None:
        self._close_fd()
        self._failed = False
        self._lock = threading.Lock()  # the parent's thread may have held it at fork


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()
    for duty in list(_duties):
        duty._forget_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)

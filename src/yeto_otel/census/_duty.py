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
Files are opened read-only (flock needs no more) and created 0644 without `O_CREAT` on an
existing file, so a job of another user can still open, and contend for, a lock file the
first job made in the sticky /dev/shm (`fs.protected_regular` refuses `O_CREAT` there).

Fork: a child inherits its parent's descriptor and so its flock. A duty belongs to the
process that took it: in a forked child (a DataLoader worker) `held()` is False and the
inherited descriptor is closed, so it never keeps a dead parent's duty alive either. Exec'd
children never get the descriptor (`O_CLOEXEC`).

`held()` never raises: an error (no lock directory, no permission, no descriptor left) means
"not held"; it is counted in the ledger under `DUTY_ERROR_SOURCE` and logged once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
import weakref

from ._fault_ledger import FaultLedger

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
        self.path = os.path.join(directory, _FILE_PREFIX + _digest(key) + ".lock")
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
                self._fd = _open_lock_file(self.path)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._failed = False
            return False  # another process holds it
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


def _open_lock_file(path: str) -> int:
    flags = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    while True:
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            pass
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue  # another process created it between our two opens
        try:
            os.fchmod(fd, 0o644)  # whatever the umask, others may open it to contend
        except OSError:
            pass
        return fd


def _after_fork_in_child() -> None:
    global _pid
    _pid = os.getpid()
    for duty in list(_duties):
        duty._forget_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)

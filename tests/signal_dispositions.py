"""Children that tests stop with signals start with SIGINT and SIGTERM at their defaults.

A process inherits its parent's ignored signals: a shell starts a background job (`bash
scripts/test.sh &`) with SIGINT ignored, and Python leaves an ignored SIGINT ignored, so a
child that should raise KeyboardInterrupt would not. Tests set the disposition their children
start with instead of inheriting it: `subprocess.Popen(..., preexec_fn=default_stop_signals)`.
"""

from __future__ import annotations

import signal

__all__ = ["default_stop_signals"]


def default_stop_signals() -> None:
    """preexec_fn: SIGINT and SIGTERM at their default dispositions in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

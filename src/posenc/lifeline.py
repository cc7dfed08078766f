"""A worker process's tie to the run that started it: it ends when the run ends, however (SIGKILL
too). Torch-free: `start`, a spawned pool's initializer, ties the worker before anything heavy
is unpickled or imported, so a run killed while its workers start leaves none behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
import time


def die_with(parent: int) -> None:
    """End this process when process `parent` ends: PR_SET_PDEATHSIG (Linux; named posenc-worker),
    and a thread checking every second that the parent is still ours (one gone first: at once)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            libc.prctl(15, b"posenc-worker")  # PR_SET_NAME

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="posenc-parent-watch").start()


def start(parent: int, init: bytes) -> None:
    """A pool initializer: die_with(parent), then run init = pickle of (fn, args) as fn(*args)
    (unpickled only once armed: it imports torch)."""
    die_with(parent)
    fn, args = pickle.loads(init)
    fn(*args)

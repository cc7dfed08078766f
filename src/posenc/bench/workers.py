"""Subprocess workers (`python -m posenc.bench --worker SPEC`, one JSON line out: one library's
caches never count against another) and the peak extra memory of one call: VmHWM after it
minus VmRSS before, freed heap trimmed and the peak reset first (docs/bench/README.md, Method).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import subprocess
import sys

import torch

from posenc.bench.common import GB


def proc_status_kb(field: str, path: str = "/proc/self/status") -> int | None:
    """A field of /proc/self/status (VmRSS, VmHWM) or /proc/meminfo in kB, or None off Linux."""
    try:
        with open(path) as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), None)
    except OSError:
        return None


def reset_peak_rss() -> bool:
    """Give freed heap memory back (malloc_trim: no later allocation reuses resident pages
    unseen), then reset VmHWM to the current RSS (Linux /proc/self/clear_refs)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_extra_bytes(run, device: str) -> int:
    """Peak extra memory of one run() in bytes (module doc); run() was warmed up before."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()
        return torch.cuda.max_memory_allocated() - base
    if reset_peak_rss() and proc_status_kb("VmHWM") is not None:
        base = proc_status_kb("VmRSS")
        run()
        return (proc_status_kb("VmHWM") - base) * 1024
    import resource  # stdlib, Unix only: imported where the fallback needs it

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024


def available_memory() -> float:
    """Bytes the OS can still give (MemAvailable), or the GPU's free memory."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return float(torch.cuda.mem_get_info()[0])
    kb = proc_status_kb("MemAvailable", "/proc/meminfo")
    return 8 * GB if kb is None else float(kb) * 1024


def run_worker(spec: dict) -> list[dict]:
    """The JSON result of `posenc.bench --worker` in a fresh process tied to this one (lifeline)."""
    spec = dict(spec, parent=os.getpid())
    cmd = [sys.executable, "-m", "posenc.bench", "--worker", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])

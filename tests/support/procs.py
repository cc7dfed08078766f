"""The processes a test started, read from /proc (Linux): a run's descendants, whether they
live, what they are."""

import os


def children(pid: int) -> set[int]:
    """Every live descendant of `pid` (zombies count as gone)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(entry)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo += kids
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def alive(pids) -> set[int]:
    live = set()
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] != "Z":
                    live.add(p)
        except OSError:
            pass
    return live


def spawned(pid: int) -> set[int]:
    """`pid`'s worker processes as soon as they exist (multiprocessing's spawn command line)."""
    out = set()
    for p in children(pid):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    out.add(p)
        except OSError:
            pass
    return out


def has_torch(pid: int) -> bool:
    """Whether process `pid` has loaded torch's library (its start-up import is done)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return b"libtorch" in f.read()
    except OSError:
        return False


def end(run, also=()) -> None:
    """A test's cleanup: SIGKILL the run (a Popen), its live descendants and the processes in
    `also` (its workers, orphaned if the run was killed and they outlived it)."""
    import signal

    for p in alive(children(run.pid)) | alive(also) | ({run.pid} if run.poll() is None else set()):
        os.kill(p, signal.SIGKILL)

"""Running the arena's groups as Ray tasks (`posenc arena --ray [ADDRESS]`, docs/arena/cluster.md):
one group per task with its CPU / GPU request, retried by Ray when its worker or node dies, its
rows written by the runner as a local run's. A dead driver's tasks end with it (Ray ends its
job). Ray is optional (`pip install 'posenc[ray]'`), imported only here.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future

from posenc.arena.workers import init_worker

INSTALL_HINT = "--ray needs Ray, which is not installed: pip install 'posenc[ray]'"
RETRIES = 3  # Ray's own retries of a task whose worker process or node died

_RUN: dict = {}  # the run whose tasks a Ray worker process holds (workers outlive runs)


def import_ray():
    try:
        import ray
    except ImportError:
        raise ValueError(INSTALL_HINT) from None
    return ray


def run_on_node(run_id: str, tasks: dict, threads: int, fn, job):
    """A Ray task: the worker's tasks and threads set once per run, then fn(job)."""
    if _RUN.get("id") != run_id:
        init_worker(tasks, threads)
        _RUN["id"] = run_id
    return fn(job)


class RayExecutor:
    """The runner's executor over Ray: address "local" (a new Ray on 127.0.0.1), "auto" or
    "HOST:PORT"; slots: groups in flight (default: as many as the cluster's CPUs / GPUs fit)."""

    whole = False  # a lost worker loses only its own task

    def __init__(self, address: str, tasks: dict, *, cpus_per_cell: int = 1,
                 gpus_per_cell: float = 0, slots: int | None = None):  # fmt: skip
        ray = self.ray = import_ray()
        quiet = dict(log_to_driver=False, configure_logging=False)
        if address == "local":  # a new local Ray, never one already running here
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                     **quiet)  # fmt: skip
        else:
            ray.init(address=address, **quiet)
        lost = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ObjectLostError",
                "OwnerDiedError")  # fmt: skip
        self.lost_errors = tuple(getattr(ray.exceptions, n) for n in lost)
        resources = ray.cluster_resources()
        fit = int(resources.get("CPU", 0) // cpus_per_cell)
        if gpus_per_cell:
            fit = min(fit, int(resources.get("GPU", 0) // gpus_per_cell))
        if fit < 1:
            ray.shutdown()
            raise ValueError(
                f"--cpus-per-cell {cpus_per_cell} / --gpus-per-cell {gpus_per_cell}: the cluster "
                f"has {resources.get('CPU', 0):g} CPUs and {resources.get('GPU', 0):g} GPUs"
            )
        self.slots = slots or fit
        self.run_id, self.threads = uuid.uuid4().hex, cpus_per_cell
        self.tasks = ray.put(tasks)  # sent to each node once, not with every group
        self.remote = ray.remote(run_on_node).options(
            num_cpus=cpus_per_cell, num_gpus=gpus_per_cell, max_retries=RETRIES
        )

    def submit(self, fn, job) -> Future:
        return self.remote.remote(self.run_id, self.tasks, self.threads, fn, job).future()

    def lost(self, err: BaseException) -> bool:
        return isinstance(err, self.lost_errors)

    def shutdown(self) -> None:
        self.ray.shutdown()  # disconnects; stops the local Ray if this run started it

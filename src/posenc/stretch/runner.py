"""The stretch grid on the arena's machinery: SQLite rows, leases, workers or Ray.

A job is one unit of work, leased and written as one transaction (a kill loses at most the job
in flight, two runs on one database share the jobs):
    ppl        (document, scaling): every length from the fewest passes (measure.py)
    retrieval  (task, scaling, seed, length): every depth, one prompt each
Rows use the arena's Store: task ("ppl/<document>" or the retrieval task), encoding
("<model>:<scaling label>"), seed, train_len (the model's context), eval_len (the length),
metric (ppl, loss, loss@a-b; exact@<depth>, exact) and the config that made them.
A worker process loads the model once and keeps it; equal frequencies at equal lengths are
measured once (dynamic scalings at or below the context are the unscaled model).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field

import torch

from posenc import __version__
from posenc.arena.cluster import RayExecutor
from posenc.arena.runner import Progress, drive, fmt_time
from posenc.arena.store import Row
from posenc.arena.workers import StopRun, local_executor
from posenc.hf import patch
from posenc.hf.patch import rotary_modules
from posenc.stretch import data, measure, models
from posenc.stretch.scalings import Scaling

PROTOCOL = "stretch-1"  # bump when what a row means changes
LEASE_SECONDS = 600.0  # a job's lease, renewed every <= 30 s while it runs


@dataclass(frozen=True)
class StretchConfig:
    model: models.ModelSpec
    scalings: tuple[Scaling, ...]
    lengths: tuple[int, ...]
    tasks: tuple[str, ...]
    retrieval_lengths: tuple[int, ...]
    depths: tuple[float, ...]
    seeds: int
    documents: tuple[data.Document, ...]
    context: int  # the model's max_position_embeddings
    head_dim: int
    factor: float  # the default factor of static scalings
    db: str
    out: str
    device: str = "cpu"
    workers: int = 1
    ray: str | None = None
    cpus_per_cell: int = 1
    gpus_per_cell: float = 0.0
    tolerance: float = 0.05
    config: object = field(default=None, compare=False, repr=False)  # the model's, for estimates


@dataclass(frozen=True)
class Job:
    task: str  # "ppl/<doc>" or a retrieval task
    scaling: Scaling
    params: dict | None  # rope_parameters for posenc.hf.patch (None: the model's own)
    encoding: str  # "<model>:<label>", the rows' encoding column
    seed: int
    lengths: tuple[int, ...]
    depths: tuple[float, ...]
    model: models.ModelSpec
    device: str
    context: int
    head_dim: int
    threads: int
    cfg: dict = field(hash=False, compare=False)  # what decides the rows (hashed into them)
    text: str | None = field(default=None, hash=False, compare=False, repr=False)

    @property
    def key(self) -> tuple:
        """The lease: (task, encoding, seed, context for ppl / the length for retrieval)."""
        return (self.task, self.encoding, self.seed,
                self.context if self.task.startswith("ppl/") else self.lengths[0])  # fmt: skip

    @property
    def hash(self) -> str:
        return hashlib.sha1(json.dumps(self.cfg, sort_keys=True).encode()).hexdigest()[:16]


def metrics(job: Job, length: int) -> list[str]:
    if job.task.startswith("ppl/"):
        return list(measure.prefix_rows(torch.zeros(length), length, job.context))
    return [f"exact@{d:g}" for d in job.depths] + ["exact"]


def make_jobs(cfg: StretchConfig) -> list[Job]:
    """Every job of the grid: perplexity first, then retrieval by length, scaling, seed (a
    scaling's prompts of one length in a row share their prefixes: measure.PromptCache)."""
    jobs, threads = [], max(1, (os.cpu_count() or 1) // max(1, cfg.workers))
    if cfg.ray:
        threads = cfg.cpus_per_cell
    common = dict(model=cfg.model, device=cfg.device, context=cfg.context,
                  head_dim=cfg.head_dim, threads=threads)  # fmt: skip
    base = {"protocol": PROTOCOL, "model": cfg.model.name, "context": cfg.context}

    def params(s: Scaling):
        return s.params(context=cfg.context, head_dim=cfg.head_dim, factor=cfg.factor)

    if "ppl" in cfg.tasks:
        for doc in cfg.documents:
            for s in cfg.scalings:
                c = base | {"task": "ppl", "document": doc.name, "text": doc.digest,
                            "scaling": params(s)}  # fmt: skip
                jobs.append(Job(f"ppl/{doc.name}", s, params(s), f"{cfg.model.name}:{s.label}", 0,
                                cfg.lengths, (), cfg=c, text=doc.text, **common))  # fmt: skip
    for length in cfg.retrieval_lengths:
        for s in cfg.scalings:
            for task in (t for t in cfg.tasks if t != "ppl"):
                for seed in range(cfg.seeds):
                    c = base | {"task": task, "depths": list(cfg.depths), "scaling": params(s)}
                    jobs.append(Job(task, s, params(s), f"{cfg.model.name}:{s.label}", seed,
                                    (length,), cfg.depths, cfg=c, **common))  # fmt: skip
    return jobs


# ------------------------------------------------------------------------------- in a worker

_LOADED: dict = {}  # (model path, device) -> (model, tokenizer), kept across jobs
_MEMO: dict = {}  # (what, fingerprint, ...) -> a measured result, kept across jobs


def loaded(job: Job):
    key = (job.model, job.device)
    if key not in _LOADED:
        _LOADED.clear()
        _MEMO.clear()
        try:
            model, tokenizer = models.load(job.model, job.device)
        except ValueError as err:  # every job would fail the same way: the run stops
            raise StopRun(str(err)) from None
        measure.use_prefix_attention(model)  # retrieval prompts share their prefixes
        _LOADED[key] = model, tokenizer
    return _LOADED[key]


def preload(cfg: StretchConfig) -> None:
    """Load the model in this process now (workers=1: its jobs run here and take it)."""
    loaded(Job(task="load", scaling=None, params=None, encoding="", seed=0, lengths=(),
               depths=(), model=cfg.model, device=cfg.device, context=cfg.context,
               head_dim=cfg.head_dim, threads=1, cfg={}))  # fmt: skip


def repatch(model, params: dict | None):
    """posenc.hf.patch over the model's own rotary modules (kept the first time, put back before
    each patch): the same model takes one scaling after another."""
    own = model.__dict__.setdefault("_stretch_own_rotary", dict(rotary_modules(model)))
    for name, module in own.items():
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, module)
    return patch(model) if params is None else patch(model, scaling=dict(params))


def patched(job: Job):
    model, tokenizer = loaded(job)
    return repatch(model, job.params), tokenizer


def run_job(job: Job) -> list[tuple]:
    """(length, metric, value, reason) of every row of the job: value None and the reason
    where it cannot be measured (a document shorter than the length, a length too short for
    the prompt)."""
    torch.set_num_threads(job.threads)
    model, tokenizer = patched(job)
    if job.task.startswith("ppl/"):
        return ppl_rows(job, model, tokenizer)
    return retrieval_rows(job, model, tokenizer)


def ppl_rows(job: Job, model, tokenizer) -> list[tuple]:
    ids = _MEMO.get(("ids", job.task, job.cfg["text"]))
    if ids is None:
        ids = torch.tensor(data._encode(tokenizer, job.text))
        _MEMO[("ids", job.task, job.cfg["text"])] = ids
    lengths = [n for n in job.lengths if n <= ids.numel()]
    short = [(n, m, None, f"the document has fewer than {n} tokens")
             for n in job.lengths if n > ids.numel() for m in metrics(job, n)]  # fmt: skip
    groups: dict[str, list[int]] = {}
    for n in lengths:
        groups.setdefault(measure.fingerprint(model, n, job.head_dim), []).append(n)
    rows = short  # lengths past the document: 'n/a' (the protocol reads documents >= T only)
    for fp, group in groups.items():
        key = ("nll", job.task, job.cfg["text"], fp)
        nll = _MEMO.get(key)
        if nll is None or nll.numel() < max(group) - 1:
            nll = measure.token_nll(model, ids[: max(group)])
            _MEMO[key] = nll
        for n in group:
            rows += [(n, m, v, None) for m, v in measure.prefix_rows(nll, n, job.context).items()]
    return rows


def retrieval_rows(job: Job, model, tokenizer) -> list[tuple]:
    (length,) = job.lengths
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    exact = {}
    reuse = _MEMO.setdefault("prompt cache", measure.PromptCache())
    for depth in sorted(job.depths, reverse=True):  # deepest needle first: the most shared
        try:
            p = data.prompt(job.task, tokenizer, length, depth, job.seed)
        except data.TooShort as err:
            return [(length, m, None, str(err)) for m in metrics(job, length)]
        fps = tuple(measure.fingerprint(model, n, job.head_dim)
                    for n in (length, length + p.max_new_tokens))  # fmt: skip
        key = ("answer", job.task, job.seed, length, depth, fps)
        if key not in _MEMO:
            tokens = measure.answer(model, p.ids, p.max_new_tokens, pad, reuse=reuse, key=fps)
            _MEMO[key] = tokenizer.decode(tokens, skip_special_tokens=True)
        exact[depth] = measure.exact_match(_MEMO[key], p.answer)
    scores = [(f"exact@{d:g}", exact[d]) for d in job.depths]
    scores.append(("exact", sum(v for _, v in scores) / len(scores)))
    return [(length, m, v, None) for m, v in scores]


# ----------------------------------------------------------------------------- in the parent


def executor(cfg: StretchConfig):
    if cfg.ray:
        return RayExecutor(cfg.ray, {}, cpus_per_cell=cfg.cpus_per_cell,
                           gpus_per_cell=cfg.gpus_per_cell, slots=cfg.workers or None)  # fmt: skip
    return local_executor(cfg.workers, {}, max(1, (os.cpu_count() or 1) // cfg.workers))


def missing(store, job: Job) -> tuple[int, ...]:
    """The lengths of a job whose rows are not all in the database (ValueError if its rows came
    from another configuration)."""
    have = {}
    for r in store.cell_rows(job.task, job.encoding, job.seed, job.context):
        if r[4] != job.hash:
            raise ValueError(
                f"--db: {store.path} holds {job.task} {job.encoding} from another configuration "
                f"(hash {r[4]}, this run {job.hash}); use another --db"
            )
        have.setdefault(r[0], set()).add(r[1])
    return tuple(n for n in job.lengths if not set(metrics(job, n)) <= have.get(n, set()))


FORWARD_EFFICIENCY = 0.4  # a forward pass's FLOP/s over a square matmul's, on a CPU
RETRIEVAL_PASSES = 2.0  # a retrieval prompt: its prefill and the answer's decoding, in passes


def cpu_rate() -> float:
    """The FLOP/s a forward pass gets on this machine now: a float32 matmul's rate measured
    (~0.1 s, under whatever else runs) times FORWARD_EFFICIENCY (SmolLM2-135M's 16k-token pass,
    1.4e13 FLOPs, took 117 s in docs/stretch's run: ~1.2e11 FLOP/s, ~0.4 of the matmul's)."""
    a = torch.randn(768, 768)
    a @ a
    t, reps = time.perf_counter(), 4
    for _ in range(reps):
        a @ a
    return FORWARD_EFFICIENCY * reps * 2 * 768**3 / max(time.perf_counter() - t, 1e-6)


def estimate(cfg: StretchConfig, jobs: list[Job], rate: float) -> float:
    """Seconds the jobs should take at `rate` FLOP/s: a perplexity job a pass at its longest
    length (dynamic scalings one per length past the context), a retrieval job a pass per depth."""
    if cfg.config is None:
        return float("nan")
    total = 0.0
    for j in jobs:
        if j.task.startswith("ppl/"):
            dynamic = j.scaling.name in ("dynamic", "dynamic_yarn")
            lens = [n for n in j.lengths if n > j.context] if dynamic else []
            total += sum(models.flops(cfg.config, n) for n in lens or [max(j.lengths)])
        else:
            total += RETRIEVAL_PASSES * len(j.depths) * models.flops(cfg.config, j.lengths[0])
    return total / rate


def plan_lines(cfg: StretchConfig, jobs: list[Job]) -> list[str]:
    """What the run will do, for stderr before the first job: the grid, what each scaling
    scales on a model with RoPE per layer type, and the estimated time."""
    n_ppl = sum(j.task.startswith("ppl/") for j in jobs)
    prompts = sum(len(j.depths) for j in jobs if not j.task.startswith("ppl/"))
    longest = max(n for j in jobs for n in j.lengths)
    rate = cpu_rate() if cfg.device == "cpu" else float("nan")
    secs = estimate(cfg, jobs, rate) / max(1, min(cfg.workers, len(jobs)))
    when = f"~{fmt_time(secs)} estimated on this CPU (+ loading)"
    if secs != secs:  # not measured on this device
        when = f"on {cfg.device}"
    lines = [f"stretch: {cfg.model.name}, context {cfg.context}: {len(jobs)} jobs left "
             f"({n_ppl} perplexity, {len(jobs) - n_ppl} retrieval with {prompts} prompts; each "
             f"a forward pass of up to {longest} tokens), {when}"]  # fmt: skip
    for s in cfg.scalings:
        if s.targets is not None:
            how = "as named" if s.layer_type else "as transformers applies a flat rope_scaling"
            lines.append(f"stretch: {s.label} scales the {', '.join(s.targets)} layers ({how}); "
                         "the other layer types keep their own rope")  # fmt: skip
    return lines


def run(cfg: StretchConfig, store) -> int:
    """Run every job whose rows are missing; returns the number of rows written."""
    jobs = []
    for job in make_jobs(cfg):
        todo = missing(store, job)
        if todo:
            jobs.append(Job(**{**job.__dict__, "lengths": todo}))
    if not jobs:
        print(f"stretch: every row is already in {store.path}", file=sys.stderr)
        return 0
    for line in plan_lines(cfg, jobs):
        print(line, file=sys.stderr)
    versions = {"posenc_version": __version__, "torch_version": torch.__version__}
    started: dict = {}

    def fresh(job: Job) -> bool:
        if not missing(store, job):
            return False
        started.setdefault(job.key, time.time())
        return True

    def write(job: Job, result, progress: Progress) -> int:
        todo = set(missing(store, job))  # another run may have written some meanwhile
        rows = [Row(job.task, job.encoding, job.seed, job.context, n, m, v,
                    "ok" if v is not None else "n/a", why)
                for n, m, v, why in result if n in todo]  # fmt: skip
        wall = time.time() - started.pop(job.key, time.time())
        if rows:
            store.write_cell(rows, config=job.cfg, config_hash=job.hash, wall_time=wall,
                             **versions)  # fmt: skip
        progress.step(f"{job.task} {job.scaling.label} seed {job.seed} "
                      f"T={','.join(map(str, job.lengths))}: {summary(result)}", wall)  # fmt: skip
        return len(rows)

    return drive(jobs, executor(cfg), store, Progress(len(jobs), "stretch jobs"), fresh=fresh,
                 write=write, name=lambda job: f"{job.task} {job.encoding}", prog="stretch",
                 unit="job(s)", lease=LEASE_SECONDS, fn=run_job)  # fmt: skip


def summary(result) -> str:
    shown = [(n, m, v) for n, m, v, _ in result if m in ("ppl", "exact")]
    return ", ".join(f"{m}@{n}=" + ("n/a" if v is None else f"{v:.3g}") for n, m, v in shown)

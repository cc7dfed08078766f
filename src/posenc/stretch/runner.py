"""The stretch grid as jobs on the arena's machinery (SQLite rows, leases, workers or Ray); the
rows' layout: docs/stretch/design.md."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace

import torch

from posenc import __version__
from posenc.arena.runner import Progress, drive, executor, fmt_time
from posenc.arena.store import Row
from posenc.arena.workers import StopRun
from posenc.hf import patch
from posenc.hf.patch import rotary_modules
from posenc.stretch import data, measure, models
from posenc.stretch.scalings import Scaling

PROTOCOL = "stretch-2"  # bump when what a row means changes
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
    windows: int = 4  # perplexity windows per document (1: the papers' first T tokens)
    probes: int = 50  # needles, each asked, per multikey / vartrack context
    config: object = field(default=None, compare=False, repr=False)  # the model's, for estimates

    @property
    def ray_slots(self) -> int:  # with --ray, --workers: the jobs in flight (arena's executor)
        return self.workers


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
    def key(self) -> tuple:  # the lease
        return (self.task, self.encoding, self.seed,
                self.context if self.task.startswith("ppl/") else self.lengths[0])  # fmt: skip

    @property
    def hash(self) -> str:
        return hashlib.sha1(json.dumps(self.cfg, sort_keys=True).encode()).hexdigest()[:16]


def metrics(job: Job, length: int) -> list[str]:
    """The metrics a job writes at `length`: `<metric>/w<k>`; `exact@<d>/p<i>`, `logp@<d>/p<i>`."""
    if job.task.startswith("ppl/"):
        names = measure.window_rows(torch.zeros(length), length, job.context,
                                    bin_width(job.context))  # fmt: skip
        return [f"{m}/w{k}" for k in range(job.cfg["windows"]) for m in names]
    return [f"{what}@{d:g}/p{i}" for i, d in enumerate(job.depths) for what in ("exact", "logp")]


def bin_width(context: int) -> int:
    return max(1, context // 8)


def make_jobs(cfg: StretchConfig) -> list[Job]:
    """Every job: ppl per document and scaling, then retrieval by length, scaling, task, seed."""
    jobs, threads = [], max(1, (os.cpu_count() or 1) // cfg.workers)
    threads = cfg.cpus_per_cell if cfg.ray else threads
    common = dict(model=cfg.model, device=cfg.device, context=cfg.context,
                  head_dim=cfg.head_dim, threads=threads)  # fmt: skip
    base = {"protocol": PROTOCOL, "model": cfg.model.name, "context": cfg.context}

    def params(s: Scaling):
        return s.params(context=cfg.context, head_dim=cfg.head_dim, factor=cfg.factor)

    if "ppl" in cfg.tasks:
        stride = max(cfg.lengths)
        for doc in cfg.documents:
            for s in cfg.scalings:
                c = base | dict(task="ppl", document=doc.name, text=doc.digest, kind=doc.kind)
                c |= {"windows": cfg.windows, "scaling": params(s)}
                if cfg.windows > 1:  # one window is the first T tokens whatever the stride
                    c["stride"] = stride  # (a length added later reuses the rows)
                jobs.append(Job(f"ppl/{doc.name}", s, params(s), f"{cfg.model.name}:{s.label}", 0,
                                cfg.lengths, (), cfg=c, text=doc.text, **common))  # fmt: skip
    for length in cfg.retrieval_lengths:
        for s in cfg.scalings:
            for task in (t for t in cfg.tasks if t != "ppl"):
                depths = cfg.depths if task == "passkey" else tuple(data.spread(cfg.probes))
                for seed in range(cfg.seeds):
                    c = base | {"task": task, "depths": list(depths), "scaling": params(s)}
                    jobs.append(Job(task, s, params(s), f"{cfg.model.name}:{s.label}", seed,
                                    (length,), depths, cfg=c, **common))  # fmt: skip
    return jobs


_LOADED: dict = {}  # in a worker: (model path, device) -> (model, tokenizer), kept across jobs
_MEMO: dict = {}  # (what, fingerprint, ...) -> a measured result, kept across jobs


def loaded(spec: models.ModelSpec, device: str):
    """(model, tokenizer), loaded once per process."""
    key = (spec, device)
    if key not in _LOADED:
        _LOADED.clear()
        _MEMO.clear()
        try:
            model, tokenizer = models.load(spec, device)
        except ValueError as err:  # every job would fail the same way: the run stops
            raise StopRun(str(err)) from None
        # retrieval prompts share their prefixes on a CPU; a GPU's SDPA runs in O(T) memory
        measure.use_prefix_attention(model) or measure.use_repeat_attention(model)
        _LOADED[key] = model, tokenizer
    return _LOADED[key]


def repatch(model, params: dict | None):
    """posenc.hf.patch over the model's own rotary modules (kept the first time, put back before
    each patch): the same model takes one scaling after another."""
    own = model.__dict__.setdefault("_stretch_own_rotary", dict(rotary_modules(model)))
    for name, module in own.items():
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, module)
    return patch(model) if params is None else patch(model, scaling=dict(params))


def patched(job: Job):
    model, tokenizer = loaded(job.model, job.device)
    return repatch(model, job.params), tokenizer


def run_job(job: Job) -> list[tuple]:
    """(length, metric, value, reason) of every row of the job (value None: the reason)."""
    torch.set_num_threads(job.threads)
    model, tokenizer = patched(job)
    if job.task.startswith("ppl/"):
        return ppl_rows(job, model, tokenizer)
    return retrieval_rows(job, model, tokenizer)


def ppl_rows(job: Job, model, tokenizer) -> list[tuple]:
    """The document's windows, each length from one pass per window and rotary frequencies."""
    key = ("ids", job.task, job.cfg["text"])
    if key not in _MEMO:
        _MEMO[key] = data._encode(tokenizer, job.text), data.specials(tokenizer)[0]
    body, head = _MEMO[key]
    stride, width = job.cfg.get("stride", max(job.lengths)), bin_width(job.context)
    groups: dict[str, list[int]] = {}
    for n in job.lengths:
        groups.setdefault(measure.fingerprint(model, n, job.head_dim), []).append(n)
    rows = []
    for k in range(job.cfg["windows"]):
        for fp, group in groups.items():
            fits = [n for n in group if data.window(body, head, n, stride, k) is not None]
            for n in (n for n in group if n not in fits):
                why = (f"the document holds {len(head) + len(body)} tokens: no window {k} of "
                       f"{n} tokens (windows start every {stride})")  # fmt: skip
                rows += [(n, m, None, why) for m in metrics(job, n) if m.endswith(f"/w{k}")]
            if not fits:
                continue
            key = ("nll", job.task, job.cfg["text"], fp, stride, k)
            nll = _MEMO.get(key)
            if nll is None or nll.numel() < max(fits) - 1:
                ids = data.window(body, head, max(fits), stride, k)
                nll = _MEMO[key] = measure.token_nll(model, torch.tensor(ids))
            for n in fits:
                got = measure.window_rows(nll, n, job.context, width)
                rows += [(n, f"{m}/w{k}", v, None) for m, v in got.items()]
    return rows


def retrieval_rows(job: Job, model, tokenizer) -> list[tuple]:
    """Every probe: passkey a context per depth (deepest first: they share the most prefix),
    the other tasks one context with a needle per depth."""
    (length,) = job.lengths
    reuse = _MEMO.setdefault("prompt cache", measure.PromptCache())
    order = sorted(range(len(job.depths)), key=lambda i: -job.depths[i])
    groups = [[i] for i in order] if job.task == "passkey" else [list(range(len(job.depths)))]
    rows = []
    for group in groups:
        try:
            ctx = data.context(job.task, tokenizer, length, [job.depths[i] for i in group],
                               job.seed)  # fmt: skip
        except data.TooShort as err:
            return [(length, m, None, str(err)) for m in metrics(job, length)]
        fps = tuple(measure.fingerprint(model, n, job.head_dim)
                    for n in (len(ctx.ids), length + ctx.max_new_tokens))  # fmt: skip
        key = ("probes", job.task, job.seed, length, tuple(job.depths[i] for i in group), fps)
        if key not in _MEMO:
            cache = measure.prefill(model, ctx.ids, reuse, fps)
            answers = []
            for p in ctx.probes:
                tokens, logp = measure.ask(model, cache, p.question, p.answer_ids,
                                           ctx.max_new_tokens)  # fmt: skip
                answers.append((tokenizer.decode(tokens, skip_special_tokens=True), logp))
            _MEMO[key] = answers
        for i, p, (text, logp) in zip(group, ctx.probes, _MEMO[key], strict=True):
            d = job.depths[i]
            rows += [(length, f"exact@{d:g}/p{i}", measure.exact_match(text, p.answer), None),
                     (length, f"logp@{d:g}/p{i}", logp, None)]  # fmt: skip
    return rows


def missing(store, job: Job) -> tuple[int, ...]:
    """The job's lengths not all in the database (Store.written: another configuration's rows
    are refused)."""
    key = (job.task, job.encoding, job.seed, job.context)
    have = store.written(key, job.hash, f"{job.task} {job.encoding}")
    return tuple(n for n in job.lengths if not set(metrics(job, n)) <= have.get(n, set()))


# a forward pass's FLOP/s over a square matmul's, on a CPU (SmolLM2-135M's 16k-token pass, 1.4e13
# FLOPs, took 117 s in docs/stretch's run: ~1.2e11 FLOP/s)
FORWARD_EFFICIENCY = 0.4
RETRIEVAL_PASSES = 2.0  # a pass-key prompt: its prefill and the answer's decoding, in passes
PROBE_TOKENS = 64  # a multikey / vartrack probe after its cached context: question, answer and
# decoding, in tokens (measure.ask; 0.67 CPU-s at 4k on this CPU, as priced here)


def cpu_rate() -> float:
    """A forward pass's FLOP/s here now: a float32 matmul's, measured, x FORWARD_EFFICIENCY."""
    a = torch.randn(768, 768)
    a @ a
    t, reps = time.perf_counter(), 4
    for _ in range(reps):
        a @ a
    return FORWARD_EFFICIENCY * reps * 2 * 768**3 / max(time.perf_counter() - t, 1e-6)


def estimate(cfg: StretchConfig, jobs: list[Job], rate: float) -> float:
    """CPU-seconds of the jobs at `rate` FLOP/s, each at its share of the cores (a multikey /
    vartrack probe on one thread: measure.ask)."""
    if cfg.config is None:
        return float("nan")
    total, cores = 0.0, os.cpu_count() or 1
    for j in jobs:
        n, share = max(j.lengths), min(1.0, j.threads / cores)
        if j.task.startswith("ppl/"):
            dynamic = j.scaling.name in ("dynamic", "dynamic_yarn")
            lens = [m for m in j.lengths if m > j.context] if dynamic else []
            work = j.cfg["windows"] * sum(models.flops(cfg.config, m) for m in lens or [n])
        elif j.task == "passkey":
            work = RETRIEVAL_PASSES * len(j.depths) * models.flops(cfg.config, n)
        else:
            probe = models.flops(cfg.config, PROBE_TOKENS, past=n) * j.threads
            work = models.flops(cfg.config, n) + len(j.depths) * probe
        total += work / share
    return total / rate


def plan_lines(cfg: StretchConfig, jobs: list[Job]) -> list[str]:
    """What the run will do and its estimated time, for stderr before the first job."""
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
    jobs = [replace(job, lengths=todo) for job in make_jobs(cfg) if (todo := missing(store, job))]
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

    return drive(jobs, executor(cfg, {}), store, Progress(len(jobs), "stretch jobs"), fresh=fresh,
                 write=write, name=lambda job: f"{job.task} {job.encoding}", prog="stretch",
                 unit="job(s)", lease=LEASE_SECONDS, fn=run_job)  # fmt: skip


def summary(result) -> str:
    """ppl and exact match per length of a job's rows."""
    got: dict = {}
    for n, m, v, _ in result:
        what = m.partition("/")[0].partition("@")[0]
        if v is not None and (what == "exact" or m.partition("/")[0] == "loss"):
            got.setdefault((n, what), []).append(v)
    return ", ".join(f"{'ppl' if w == 'loss' else w}@{n}="
                     + f"{math.exp(sum(v) / len(v)) if w == 'loss' else sum(v) / len(v):.3g}"
                     for (n, w), v in sorted(got.items())) or "n/a"  # fmt: skip

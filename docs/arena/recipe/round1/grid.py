"""Run cells through the real runner code (train + evaluate): python exp/grid.py TASK ENC [SEED] [key=val ...]"""
import sys, time, json, numpy as np, torch
torch.set_num_threads(1)
import posenc
assert posenc.__file__.startswith('/work/arena-exp'), posenc.__file__
from posenc.arena import runner as R
from posenc.arena.tasks import build_task
task_name, enc = sys.argv[1], sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
extra = {k: type(getattr(R.ArenaConfig(), k))(v) for k, v in (a.split('=') for a in sys.argv[4:])}
cfg = R.ArenaConfig(tasks=[task_name], encodings=[enc], seeds=seed + 1, out='/tmp/arena_exp_out', **extra)
task = build_task(task_name)
cells = [c for c in R.make_cells(cfg, {task_name: task}) if c.seed == seed]
cell = cells[0]; tcfg = R.task_config(cfg, task_name)
import os, shutil; shutil.rmtree('/tmp/arena_exp_out', ignore_errors=True)
t0 = time.time()
model = R.train(cell, task, tcfg, R.Progress(tcfg.steps, 1))
t_train = time.time() - t0
rows = [r for e in tcfg.eval_lens for r in R.evaluate(model, task, cell, e, tcfg)]
wall = time.time() - t0
L = tcfg.train_len
acc = {r.eval_len: r.value for r in rows if r.metric == 'accuracy'}
tok = {r.eval_len: r.value for r in rows if r.metric == 'token_accuracy'}
ood = [e for e in range(L + 1, 2 * L + 1) if acc.get(e) is not None]
res = dict(task=task_name, enc=enc, seed=seed, L=L, steps=tcfg.steps, lr=tcfg.lr, batch=tcfg.batch_size,
           accL=round(acc[L], 3), tokL=round(tok[L], 3),
           acc_ood=round(float(np.mean([acc[e] for e in ood])), 3) if ood else None,
           tok_ood=round(float(np.mean([tok[e] for e in ood])), 3) if ood else None,
           acc_in=round(float(np.mean([acc[e] for e in range(1, L + 1)])), 3),
           curve=' '.join('n/a' if acc[e] is None else f'{acc[e]:.2f}' for e in sorted(acc)),
           t_train=round(t_train, 1), wall=round(wall, 1), tag='grid ' + ' '.join(sys.argv[4:]))
print(json.dumps(res), flush=True)
open('/work/arena-exp/exp/grid.jsonl', 'a').write(json.dumps(res) + '\n')

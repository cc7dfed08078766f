"""Train + evaluate one arena cell with knobs. PYTHONPATH=/work/arena-exp/src python exp/cell.py ..."""
import argparse, json, math, time, sys
import numpy as np, torch, torch.nn.functional as F
torch.set_num_threads(1)
import posenc
from posenc.arena.tasks import build_task
from posenc.arena.runner import encoding_kwargs
assert posenc.__file__.startswith('/work/arena-exp'), posenc.__file__

p = argparse.ArgumentParser()
p.add_argument('--task', default='copy'); p.add_argument('--enc', default='nope')
p.add_argument('--L', type=int, default=16); p.add_argument('--dim', type=int, default=64)
p.add_argument('--depth', type=int, default=4); p.add_argument('--heads', type=int, default=4)
p.add_argument('--batch', type=int, default=32); p.add_argument('--steps', type=int, default=3000)
p.add_argument('--lr', type=float, default=1e-3); p.add_argument('--wd', type=float, default=0.01)
p.add_argument('--wdgroups', default='all', choices=['all', 'matrices'])
p.add_argument('--emb', default='current', choices=['current', 'sqrt', 'small'])
p.add_argument('--lens', default='persample', choices=['shared', 'persample', 'half'])
p.add_argument('--pad', default='right', choices=['right', 'left'])
p.add_argument('--sched', default='cos10', choices=['cos10', 'cos0', 'const'])
p.add_argument('--warm', type=int, default=100)
p.add_argument('--seed', type=int, default=0); p.add_argument('--eval_samples', type=int, default=128)
p.add_argument('--maxpos', type=int, default=0, help='randomized max_positions (0: 4*tokens(2L))')
p.add_argument('--evalevery', type=int, default=0)
p.add_argument('--tag', default='')
p.add_argument('--pack', type=int, default=0, help='pack instances into rows of tokens(L)+1 with doc ids')
a = p.parse_args()

task = build_task(a.task)
Ltok = task.tokens(a.L)
enc, ekw, max_len = a.enc, dict(encoding_kwargs(a.enc, Ltok)), None
if a.enc in ('learned', 'fire'):
    max_len = Ltok
if a.enc in ('rrope', 'rsin'):
    enc = 'randomized'
    ekw = {'base': 'rope' if a.enc == 'rrope' else 'sinusoidal',
           'max_positions': a.maxpos or 4 * task.tokens(2 * a.L)}
torch.manual_seed(a.seed)
model = posenc.TransformerLM(task.vocab_size, a.dim, a.depth, a.heads, encoding=enc,
                             encoding_kwargs=ekw, max_len=max_len, causal=True)
if a.emb == 'sqrt':
    model.embed_scale = math.sqrt(a.dim)
    torch.nn.init.normal_(model.tok_emb.weight, std=a.dim ** -0.5)
elif a.emb == 'small':
    model.embed_scale = 1.0
    torch.nn.init.normal_(model.tok_emb.weight, std=0.02)
elif a.enc == 'rsin':  # 'current' scheme: what sinusoidal gets
    model.embed_scale = math.sqrt(a.dim)
    torch.nn.init.normal_(model.tok_emb.weight, std=a.dim ** -0.5)

if a.wdgroups == 'all':
    groups = [{'params': list(model.parameters()), 'weight_decay': a.wd}]
else:
    dec, nodec = [], []
    for n, q in model.named_parameters():
        (dec if (q.dim() >= 2 and n.startswith('blocks') ) else nodec).append(q)
    groups = [{'params': dec, 'weight_decay': a.wd}, {'params': nodec, 'weight_decay': 0.0}]
opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98))

def lr_at(step):
    warm = a.warm
    if step < warm:
        return a.lr * (step + 1) / warm
    if a.sched == 'const':
        return a.lr
    t = (step - warm) / max(1, a.steps - warm)
    floor = 0.1 if a.sched == 'cos10' else 0.0
    return a.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))

def to_left(batch, sizes):
    x, y, m = (t.clone() for t in batch)
    T = x.shape[1]
    for i, n in enumerate(sizes):
        k = T - task.tokens(int(n))
        if k:
            x[i] = torch.roll(x[i], k); y[i] = torch.roll(y[i], k); m[i] = torch.roll(m[i], k)
    return x, y, m

rng = np.random.default_rng([a.seed, 7])

def pack(sizes):
    cap = Ltok + 1
    rows = []
    for n in sorted(sizes, reverse=True):
        need = task.tokens(int(n)) + 1
        for r in rows:
            if r[0] >= need:
                r[0] -= need; r[1].append(int(n)); break
        else:
            rows.append([cap - need, [int(n)]])
    s = np.zeros((len(rows), cap), dtype=np.int64); ans = np.zeros_like(s, dtype=bool)
    doc = np.zeros_like(s)
    for i, (rem, ns) in enumerate(rows):
        off = 0
        for j, n in enumerate(ns):
            si, ai = task._instances(rng, 1, n); w = si.shape[1]
            s[i, off:off + w] = si[0]; ans[i, off:off + w] = ai[0]; doc[i, off:off + w] = j; off += w
        doc[i, off:] = len(ns)
    t = lambda z: torch.from_numpy(np.ascontiguousarray(z))
    return t(s[:, :-1]), t(s[:, 1:]), t(ans[:, 1:]), t(doc[:, :-1])
minsz = task.min_size

@torch.no_grad()
def evaluate(sizes_list):
    model.eval(); out = {}
    for n in sizes_list:
        if max_len and task.tokens(n) > max_len:
            continue
        r = np.random.default_rng([12345, n])
        b = task.sample_batch(r, a.eval_samples, n)
        logits = model(b.inputs)
        hit = logits.argmax(-1) == b.targets
        out[n] = ((hit | ~b.mask).all(1).float().mean().item(), hit[b.mask].float().mean().item())
    model.train(); return out

t0 = time.time(); ema = None; model.train()
for step in range(a.steps):
    if a.lens == 'shared':
        sizes = np.full(a.batch, rng.integers(minsz, a.L + 1))
    elif a.lens == 'persample':
        sizes = rng.integers(minsz, a.L + 1, size=a.batch)
    else:
        sizes = rng.integers(minsz, a.L + 1, size=a.batch); sizes[: a.batch // 2] = a.L
    doc = None
    if a.pack:
        x, y, m, doc = pack(sizes)
    else:
        batch = task.sample(rng, sizes)
        x, y, m = to_left(batch, sizes) if a.pad == 'left' else batch
    for g in opt.param_groups: g['lr'] = lr_at(step)
    logits = model(x, doc_ids=doc)
    loss = F.cross_entropy(logits[m], y[m])
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    v = loss.item(); ema = v if ema is None else 0.98 * ema + 0.02 * v
    if a.evalevery and (step + 1) % a.evalevery == 0:
        e = evaluate([a.L])
        print(f'  step {step+1} loss {ema:.3f} acc@L {e[a.L][0]:.3f} tok {e[a.L][1]:.3f} ({time.time()-t0:.0f}s)', flush=True)
t_train = time.time() - t0
t1 = time.time()
ev = evaluate(list(range(1, 2 * a.L + 1)))
t_eval = time.time() - t1
ood = [ev[n] for n in range(a.L + 1, 2 * a.L + 1) if n in ev]
res = dict(task=a.task, enc=a.enc, L=a.L, seed=a.seed, model=f'{a.dim}x{a.depth}h{a.heads}', batch=a.batch,
           steps=a.steps, lr=a.lr, wd=a.wd, wdg=a.wdgroups, emb=a.emb, lens=a.lens, pad=a.pad, sched=a.sched,
           loss=round(ema, 4), accL=round(ev[a.L][0], 3), tokL=round(ev[a.L][1], 3),
           acc_ood=round(float(np.mean([o[0] for o in ood])), 3) if ood else None,
           tok_ood=round(float(np.mean([o[1] for o in ood])), 3) if ood else None,
           acc_in=round(float(np.mean([ev[n][0] for n in range(1, a.L + 1)])), 3),
           curve=' '.join(f'{ev[n][0]:.2f}' for n in sorted(ev)),
           s_step=round(t_train / a.steps, 4), t_train=round(t_train, 1), t_eval=round(t_eval, 1),
           tag=a.tag)
print(json.dumps(res), flush=True)
with open('/work/arena-exp/exp/results.jsonl', 'a') as f:
    f.write(json.dumps(res) + '\n')

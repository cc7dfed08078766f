import argparse, json, math, time
import numpy as np, torch, torch.nn.functional as F
torch.set_num_threads(1)
import posenc
from posenc.arena.tasks import build_task
p = argparse.ArgumentParser()
p.add_argument('--task', default='copy'); p.add_argument('--enc', default='nope')
p.add_argument('--L', type=int, default=8); p.add_argument('--dim', type=int, default=64)
p.add_argument('--depth', type=int, default=4); p.add_argument('--heads', type=int, default=4)
p.add_argument('--batch', type=int, default=32); p.add_argument('--steps', type=int, default=2000)
p.add_argument('--lr', type=float, default=2e-3); p.add_argument('--wd', type=float, default=0.1)
p.add_argument('--warm', type=int, default=100); p.add_argument('--seed', type=int, default=0)
p.add_argument('--atL', type=float, default=0.5); p.add_argument('--sample_len', type=int, default=0)
a = p.parse_args()
task = build_task(a.task)
T_L = task.tokens(a.L)
kw = {}
enc = a.enc
if enc.startswith('randomized_'):
    kw = {'encoding': enc.split('_', 1)[1], 'sample_len': a.sample_len or 4 * task.tokens(2 * a.L), 'sample_at_eval': True}
    enc = 'randomized'
torch.manual_seed(a.seed)
model = posenc.TransformerLM(task.vocab_size, a.dim, a.depth, a.heads, encoding=enc, encoding_kwargs=kw, train_len=T_L)
dec, nodec = [], []
for n, q in model.named_parameters():
    (dec if (q.dim() >= 2 and n.startswith('blocks')) else nodec).append(q)
opt = torch.optim.AdamW([{'params': dec, 'weight_decay': a.wd}, {'params': nodec, 'weight_decay': 0.0}], lr=a.lr, betas=(0.9, 0.98))
def lr_at(s):
    if s < a.warm: return a.lr * (s + 1) / a.warm
    t = (s - a.warm) / max(1, a.steps - a.warm)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))
rng = np.random.default_rng([a.seed, 7])
t0 = time.time()
model.train()
for step in range(a.steps):
    nL = int(a.batch * a.atL)
    sizes = np.concatenate([np.full(nL, a.L), rng.integers(task.min_size, a.L + 1, a.batch - nL)])
    x, y, m = task.sample(rng, sizes)[:3]
    for g in opt.param_groups: g['lr'] = lr_at(step)
    logits = model(x)
    loss = F.cross_entropy(logits[m], y[m])
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
train_s = time.time() - t0
model.eval()
res = {}
erng = np.random.default_rng([12345, 1])
with torch.no_grad():
    for n in range(1, 2 * a.L + 1):
        if n < task.min_size: continue
        x, y, m = task.sample_batch(erng, 128, n)[:3]
        hit = model(x).argmax(-1) == y
        res[n] = ((hit | ~m).all(1).float().mean().item(), hit[m].float().mean().item())
L = a.L
ind = np.mean([res[n][0] for n in res if n <= L]); ood = np.mean([res[n][0] for n in res if n > L]); oodt = np.mean([res[n][1] for n in res if n > L])
print(json.dumps(dict(task=a.task, enc=a.enc, L=L, steps=a.steps, lr=a.lr, batch=a.batch, accL=round(res[L][0],3), in_mean=round(ind,3), ood=round(ood,3), ood_tok=round(oodt,3), ms_step=round(1000*train_s/a.steps,1), secs=round(time.time()-t0,1), loss=round(loss.item(),4))), flush=True)

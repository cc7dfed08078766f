import argparse, json, math, time
import numpy as np, torch, torch.nn.functional as F
torch.set_num_threads(1)
import posenc
from posenc.arena.tasks import AdditionTask, _to_batch, PAD
p = argparse.ArgumentParser()
p.add_argument('--enc', default='nope'); p.add_argument('--fmt', default='plain')
p.add_argument('--mix', default='uniform')
p.add_argument('--L', type=int, default=5); p.add_argument('--steps', type=int, default=4000)
p.add_argument('--lr', type=float, default=1e-3); p.add_argument('--seed', type=int, default=0)
p.add_argument('--batch', type=int, default=32); p.add_argument('--H', type=int, default=24)
a = p.parse_args()

class Hinted(AdditionTask):
    # each digit preceded by its index hint; hints consecutive from a random offset
    H = a.H
    vocab_size = 13 + a.H
    def tokens(self, n): return 6 * n + 4
    def _instances(self, rng, count, n):
        s, ans = AdditionTask._instances(self, rng, count, n)
        A, B, C = s[:, :n], s[:, n + 1:2 * n + 1], s[:, 2 * n + 2:]
        o = rng.integers(0, self.H - n, size=(count, 1))
        h = 13 + o + np.arange(n + 1)[None]
        inter = lambda d, k: np.stack([h[:, :k], d], 2).reshape(count, 2 * k)
        col = lambda v: np.full((count, 1), v)
        s = np.concatenate([inter(A, n), col(1), inter(B, n), col(2), inter(C, n + 1)], 1)
        ans = np.zeros_like(s, dtype=bool); ans[:, 4 * n + 2:] = True
        return s, ans

class Aligned(AdditionTask):
    # a0 b0 c0 a1 b1 c1 ... a_{n-1} b_{n-1} c_{n-1} = c_n : each sum digit right after its pair
    vocab_size = 13
    def tokens(self, n): return 3 * n + 1
    def _instances(self, rng, count, n):
        s, ans = AdditionTask._instances(self, rng, count, n)
        A, B, C = s[:, :n], s[:, n + 1:2 * n + 1], s[:, 2 * n + 2:]
        body = np.stack([A, B, C[:, :n]], 2).reshape(count, 3 * n)
        s = np.concatenate([body, np.full((count, 1), 2), C[:, n:]], 1)
        ans = np.zeros_like(s, dtype=bool); ans[:, 2:3 * n:3] = True; ans[:, -1] = True
        return s, ans

class Carry(AdditionTask):
    # a0 b0 c0 k1 a1 b1 c1 k2 ... : each sum digit and its carry-out right after its pair
    vocab_size = 13
    def tokens(self, n): return 4 * n - 1
    def _instances(self, rng, count, n):
        s, ans = AdditionTask._instances(self, rng, count, n)
        A, B, C = s[:, :n] - 3, s[:, n + 1:2 * n + 1] - 3, s[:, 2 * n + 2:] - 3
        k = np.zeros((count, n + 1), dtype=np.int64)
        for i in range(n):
            k[:, i + 1] = (A[:, i] + B[:, i] + k[:, i]) // 10
        s = np.stack([A, B, C[:, :n], k[:, 1:]], 2).reshape(count, 4 * n) + 3
        ans = np.zeros_like(s, dtype=bool); ans[:, 2::4] = True; ans[:, 3::4] = True
        return s, ans

task = Carry() if a.fmt == 'carry' else Hinted() if a.fmt == 'hints' else Aligned() if a.fmt == 'aligned' else AdditionTask()
kw = {}; enc = a.enc
if enc.startswith('randomized_'):
    kw = {'encoding': enc.split('_', 1)[1], 'sample_len': 4 * task.tokens(2 * a.L), 'sample_at_eval': True}; enc = 'randomized'
torch.manual_seed(a.seed)
model = posenc.TransformerLM(task.vocab_size, 64, 4, 4, encoding=enc, encoding_kwargs=kw, train_len=task.tokens(a.L))
dec, nodec = [], []
for n, q in model.named_parameters():
    (dec if (q.dim() >= 2 and n.startswith('blocks')) else nodec).append(q)
opt = torch.optim.AdamW([{'params': dec, 'weight_decay': 0.1}, {'params': nodec, 'weight_decay': 0.0}], lr=a.lr, betas=(0.9, 0.98))
def lr_at(s):
    if s < 100: return a.lr * (s + 1) / 100
    t = (s - 100) / max(1, a.steps - 100)
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))
rng = np.random.default_rng([a.seed, 7]); erng = np.random.default_rng([999, 1])
def evaluate(sizes, k=128):
    model.eval(); res = {}
    with torch.no_grad():
        for n in sizes:
            x, y, m = task.sample_batch(np.random.default_rng([12345, n]), k, n)[:3]
            hit = model(x).argmax(-1) == y
            res[n] = round((hit | ~m).all(1).float().mean().item(), 3)
    model.train(); return res
t0 = time.time(); model.train(); hist = []
for step in range(a.steps):
    if a.mix == 'uniform':
        sizes = rng.integers(1, a.L + 1, a.batch)
    else:
        sizes = rng.integers(1, a.L + 1, a.batch); sizes[:a.batch // 2] = a.L
    x, y, m = task.sample(rng, sizes)[:3]
    for g in opt.param_groups: g['lr'] = lr_at(step)
    loss = F.cross_entropy(model(x)[m], y[m])
    opt.zero_grad(set_to_none=True); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
    if (step + 1) % 500 == 0:
        r = evaluate(range(1, a.L + 1), 64); hist.append((step + 1, round(loss.item(), 3), min(r.values())))
        print(step + 1, round(loss.item(), 3), r, round(time.time() - t0), flush=True)
res = evaluate(range(1, 2 * a.L + 1))
print(json.dumps(dict(vars(a), res=res, secs=round(time.time() - t0), hist=hist)), flush=True)

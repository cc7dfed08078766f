"""Right padding: a sequence's logits are identical whatever padding follows it (causal)."""
import numpy as np, torch, posenc
torch.set_num_threads(1)
from posenc.arena.tasks import build_task
import posenc.arena.runner as R
for tname in ['copy', 'addition']:
    task = build_task(tname)
    for enc in ['nope','sinusoidal','rope','alibi','t5','kerple','fire','learned','randomized']:
        torch.manual_seed(0)
        kw = R.encoding_kwargs(enc, task.tokens(16))
        if enc == 'randomized': kw = {'base': 'rope', 'max_positions': 256}
        ml = task.tokens(16) if enc in ('learned','fire') else None
        m = posenc.TransformerLM(task.vocab_size, 64, 2, 4, encoding=enc, encoding_kwargs=kw, max_len=ml).eval()
        rng = np.random.default_rng(1)
        b = task.sample(rng, np.array([5, 16, 9]))  # rows 0, 2 right-padded
        alone = [task.sample(np.random.default_rng(1), np.array([n])) for n in [5, 16, 9]]
        with torch.no_grad():
            full = m(b.inputs)
            worst = 0.0
            for i, n in enumerate([5, 16, 9]):
                T = task.tokens(n)
                single = m(b.inputs[i:i+1, :T])
                worst = max(worst, (full[i, :T] - single[0]).abs().max().item())
            # left padding: same row 0 shifted right by the pad count
            T0 = task.tokens(5); k = b.inputs.shape[1] - T0
            left = torch.roll(b.inputs[0:1], k)
            dl = (m(left)[0, k:] - full[0, :T0]).abs().max().item()
        print(f'{tname:9s} {enc:11s} right-pad max|diff| {worst:.2e}   left-pad max|diff| {dl:.2e}')

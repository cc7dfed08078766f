"""Round 5's patches, loaded in every process of a sweep run (PYTHONPATH=site): the arena's
spawned workers inherit them through the environment, not through a fork."""

import os

if os.environ.get("R5_CONFIG"):
    import torch

    import posenc.arena.train as train
    import posenc.model as model

    log = os.path.join(os.environ["R5_LOGS"], f"{os.environ['R5_CONFIG']}.{os.getpid()}.txt")
    check = train.lowest_exact_match

    def logged(m, batches, device):  # every bar check -> one line in this process's log
        v = check(m, batches, device)
        with open(log, "a") as f:
            f.write(f"{v:.4f}\n")
        return v

    train.lowest_exact_match = logged
    if os.environ.get("R5_ROWS"):  # randomized: one sorted subset per row, not per batch
        forward = model.TransformerLM.forward

        def per_row(self, tokens, positions=None, doc_ids=None, cache=None):
            if positions is None and cache is None and "sample_positions" in self.encoding.provides:
                B, T = tokens.shape
                positions = torch.arange(T, device=tokens.device).expand(B, T)
            return forward(self, tokens, positions, doc_ids, cache)

        model.TransformerLM.forward = per_row

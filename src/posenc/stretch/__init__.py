"""`posenc stretch`: how far a real pretrained RoPE model's context stretches, per RoPE scaling
(docs/stretch/design.md). Everything but `data` and `scalings` needs transformers."""

"""`posenc stretch`: how far a real pretrained RoPE model's context stretches, per RoPE scaling.

    models     the model to stretch: the embedded SmolLM2-135M, a transformers folder or a .gguf
    scalings   the scalings (labels like `yarn(factor=4)`) as rope_parameters for posenc.hf.patch
    data       the embedded long texts and the retrieval prompts (passkey, multikey, vartrack)
    measure    perplexity of every prefix from one pass, retrieval decoded with the KV cache
    runner     the grid as jobs on the arena's machinery (SQLite store, leases, workers, Ray)
    report     tables, plots, the published findings and a recommendation per target length
    cli        `posenc stretch [...]` and `posenc stretch report`

Everything but `data` and `scalings` needs transformers (`pip install 'posenc[models]'`).
"""

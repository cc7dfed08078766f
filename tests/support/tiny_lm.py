"""A tiny random Llama and a byte-level BPE tokenizer trained here, saved as a transformers model
folder: what `posenc stretch --model FOLDER` reads, built from configs in the test (nothing is
downloaded)."""

from __future__ import annotations


def tiny_llama_folder(path, *, context: int = 128, vocab: int = 600, seed: int = 0) -> str:
    from transformers import LlamaConfig

    def config(n: int):
        return LlamaConfig(vocab_size=n, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           max_position_embeddings=context, rope_theta=10000.0)  # fmt: skip

    return tiny_folder(path, config, vocab=vocab, seed=seed)


def tiny_folder(path, config, *, vocab: int = 600, seed: int = 0) -> str:
    """A model folder of `config(tokenizer vocabulary size)` (a transformers config; its own
    vocab_size may be larger), random weights, and the BPE tokenizer trained here."""
    from pydoc_data.topics import topics

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    text = "\n".join(topics[k] for k in sorted(topics)[:60])
    tok.train_from_iterator([text, "The pass key is 12345. VAR ABCDE = 67890."], trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config(tokenizer.vocab_size)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)

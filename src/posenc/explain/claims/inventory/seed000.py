"""Inventory of seed 000 (a tutorial on Vaswani et al.'s sinusoidal encoding)."""

from __future__ import annotations

from posenc.explain.claims.inventory.item import Item

SEED = "000_e2b8049db0aa593d.txt"

ITEMS = (
    Item(
        "inv-000-01",
        "顺序信息在处理过程中被天然的保存下来了",
        "comparison",
        "An RNN keeps word order by itself (it reads the words one by one), unlike attention.",
        check="claim-000-rnn-order",
    ),
    Item(
        "inv-000-02",
        "顺序信息在输入网络时就已丢失",
        "statement",
        "In a Transformer all words enter at once, so order is lost at the input.",
        check="claim-002-order",
    ),
    Item(
        "inv-000-03",
        "Positional Encoding 就是句子中词语相对位置的编码",
        "statement",
        "Positional encoding is the encoding of the words' relative positions.",
        not_checkable="definition; loose: the sinusoid encodes the absolute t, relative "
        "information appears only in dot products (claim-004-relative-dot)",
    ),
    Item(
        "inv-000-04",
        "这会导致每个词语之间的间隔变化是不一致的",
        "reason",
        "A phase in [0, 1] (first word 0, last 1) makes the gap between words depend on length.",
        check="claim-000-phase-gap",
    ),
    Item(
        "inv-000-05",
        "如果训练的句子很长的话，这样的编码是不合适的",
        "statement",
        "A raw index 0, 1, ..., N is unsuitable for long sentences: it grows without bound.",
        check="claim-000-index-unbounded",
    ),
    Item(
        "inv-000-06",
        "在泛化性上是有一定问题的",
        "statement",
        "A model trained with the raw index generalizes poorly.",
        check="claim-000-index-generalizes",
    ),
    Item(
        "inv-000-07",
        "对于每个位置的词语，它都能提供一个独一无二的编码",
        "statement",
        "The encoding should (and the sinusoid does) give every position a unique code.",
        check="claim-000-unique",
    ),
    Item(
        "inv-000-08",
        "词语之间的间隔对于不同长度的句子来说，含义应该是一致的",
        "statement",
        "The gap between two words should mean the same whatever the sentence length.",
        check="claim-000-consistent",
    ),
    Item(
        "inv-000-09",
        "能够随意延伸到任意长度的句子",
        "statement",
        "The encoding extends to sentences of any length.",
        check="claim-000-any-length",
    ),
    Item(
        "inv-000-10",
        r"\omega_k=\frac{1}{10000^{2k/d}}",
        "formula",
        "p_t = [sin(ω_1 t), cos(ω_1 t), ..., sin(ω_(d/2) t), cos(ω_(d/2) t)], "
        "ω_k = 1/10000^(2k/d).",
        check="claim-000-wavelengths",
    ),
    Item(
        "inv-000-11",
        r"余弦函数对应的频率由 $1$ 降低到了 $\frac{1}{10000}$",
        "statement",
        "From low to high dimensions the frequencies fall from 1 to 1/10000.",
        check="claim-004-frequency-range",
    ),
    Item(
        "inv-000-12",
        r"波长从 $2\pi$ 增加到了 $10000 \cdot 2\pi$",
        "statement",
        "The wavelengths grow from 2π to 10000·2π.",
        check="claim-000-wavelengths",
    ),
    Item(
        "inv-000-13",
        "而黄色位，每 8 个数字才会变化一次",
        "worked example",
        "In binary the lowest (red) bit changes with every number, the yellow bit every 8.",
        check="claim-000-binary",
    ),
    Item(
        "inv-000-14",
        "不同频率的 sines 和 cosines 组合其实也是同样的道理",
        "comparison",
        "Sines and cosines of different frequencies encode position the way binary bits do.",
        check="claim-000-binary",
    ),
    Item(
        "inv-000-15",
        "class PositionalEncoding(nn.Module):",
        "code",
        "This PyTorch class implements the sinusoidal encoding.",
        check="claim-000-code",
    ),
)

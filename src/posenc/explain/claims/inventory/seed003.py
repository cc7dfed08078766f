"""Inventory of seed 003 (a generated textbook chapter: fusion, four methods, d = 4 example)."""

from __future__ import annotations

from posenc.explain.claims.inventory.item import Item

SEED = "003_4f20139358f45fd7.txt"

ITEMS = (
    Item(
        "inv-003-01",
        "通常采用简单的向量拼接或元素级相加等操作",
        "comparison",
        "The fusion f(x_t, p_t) is usually concatenation or element-wise addition.",
        check="claim-003-fusion",
    ),
    Item(
        "inv-003-02",
        "从而提高对长期依赖关系的建模能力",
        "statement",
        "With a positional encoding sequence models capture long-term dependencies better.",
        check="claim-003-long-term",
    ),
    Item(
        "inv-003-03",
        "通常与 $d_x$ 不同",
        "statement",
        "The position vector's size d_pos usually differs from the feature size d_x.",
        check="claim-003-pos-size",
    ),
    Item(
        "inv-003-04",
        "导致计算效率低下",
        "statement",
        "One-hot position vectors of length T become high-dimensional and sparse for large T, "
        "which is inefficient.",
        check="claim-003-onehot-cost",
    ),
    Item(
        "inv-003-05",
        "无法很好地捕捉相对位置关系",
        "statement",
        "The cumulative index t is efficient but encodes only absolute position, not relative.",
        check="claim-003-index-relative",
    ),
    Item(
        "inv-003-06",
        "能够自然地编码绝对位置信息,同时也能够很好地捕捉相对位置关系",
        "statement",
        "The sinusoid encodes absolute positions and also captures relative relations well.",
        check="claim-004-relative-dot",
    ),
    Item(
        "inv-003-07",
        "但需要更多的训练数据和计算资源",
        "comparison",
        "Learned encodings are flexible but need more training data and compute.",
        check="claim-003-learned-data",
    ),
    Item(
        "inv-003-08",
        r"\sin\left(t / 10000^{2i/d_{pos}}\right)",
        "formula",
        "p_(t,2i) = sin(t/10000^(2i/d_pos)), p_(t,2i+1) = cos(...), i = 0..⌊d_pos/2⌋ - 1.",
        check="claim-003-formula",
    ),
    Item(
        "inv-003-09",
        "不同位置的向量表示会有微小的差异",
        "statement",
        "Vectors of different positions differ slightly, and the difference varies "
        "periodically with position.",
        check="claim-003-small-periodic",
    ),
    Item(
        "inv-003-10",
        "由于不同位置的向量表示是不同的",
        "statement",
        "Different positions get different vectors, so absolute positions are encoded.",
        check="claim-000-unique",
    ),
    Item(
        "inv-003-11",
        "相距较近的位置会有相似的向量表示",
        "reason",
        "Because sin and cos are periodic, near positions are similar and far ones differ more.",
        check="claim-003-near-similar",
    ),
    Item(
        "inv-003-12",
        "因此生成的位置向量元素也是有界的",
        "statement",
        "Sine and cosine lie in [-1, 1], so the encoding is bounded.",
        check="claim-003-bounded",
    ),
    Item(
        "inv-003-13",
        "这有助于模型的训练和收敛",
        "reason",
        "Being bounded helps the model train and converge.",
        check="claim-003-bounded-trains",
    ),
    Item(
        "inv-003-14",
        "计算只需要简单的三角函数运算",
        "statement",
        "The sinusoid is cheap to compute (a few trigonometric functions).",
        check="claim-003-cheap",
    ),
    Item(
        "inv-003-15",
        "可以很容易地扩展到任意长度的序列",
        "statement",
        "The sinusoid extends easily to sequences of any length.",
        check="claim-000-any-length",
    ),
    Item(
        "inv-003-16",
        r"\sin\left(1/10^{2/4}\right)",
        "formula",
        "Worked example's formula: p_t = [sin(t), cos(t), sin(t/10^(2/4)), cos(t/10^(2/4))].",
        check="claim-003-worked-example",
    ),
    Item(
        "inv-003-17",
        "0.8415, 0.5403, 0.9950, 0.0998",
        "worked example",
        "The printed p_1..p_5, e.g. p_1 = [0.8415, 0.5403, 0.9950, 0.0998].",
        check="claim-003-worked-example",
    ),
    Item(
        "inv-003-18",
        "不同位置的向量表示确实是不同的",
        "worked example",
        "In the example the vectors are all different and nearby ones (p_1, p_2) are similar.",
        check="claim-003-example-distances",
    ),
)

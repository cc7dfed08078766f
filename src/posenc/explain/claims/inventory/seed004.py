"""Inventory of seed 004 (absolute encoding as a clock; RoPE's ancestor; its code)."""

from __future__ import annotations

from posenc.explain.claims.inventory.item import Item

SEED = "004_04aee0f491a3b5de.txt"

ITEMS = (
    Item(
        "inv-004-01",
        "ROPE还是沿用了绝对位置中的很多思想",
        "statement",
        "RoPE reuses many ideas of the absolute (sinusoidal) encoding.",
        check="claim-004-rope-reuses",
    ),
    Item(
        "inv-004-02",
        r"sin(\frac{pos}{10000.0^{2i / d}})",
        "formula",
        "PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(pos/10000^(2i/d)).",
        check="claim-004-formula",
    ),
    Item(
        "inv-004-03",
        r"\cos(\theta)+i \sin(\theta)",
        "formula",
        "Consecutive dims pair into d/2 complex numbers cos θ + i sin θ, rotating vectors.",
        check="claim-004-complex-direction",
    ),
    Item(
        "inv-004-04",
        "维度越低的部分，角频率越高，转速越快",
        "statement",
        "The lower the dims, the higher the angular frequency: the smaller i, the faster.",
        check="claim-004-clock",
    ),
    Item(
        "inv-004-05",
        "区分第一个token来自10点20分10秒",
        "comparison",
        "Like a clock's second, minute and hour hands, the pairs give each token a time.",
        check="claim-004-clock-time",
    ),
    Item(
        "inv-004-06",
        "特别像傅里叶变换的思想",
        "comparison",
        "The encoding is like the Fourier transform: a signal as a sum of frequencies.",
        not_checkable="analogy; no transform is computed (p_t is one sample of d/2 "
        "sinusoids, not a spectrum of anything)",
    ),
    Item(
        "inv-004-07",
        r"=\cos(\theta_1 - \theta_2)",
        "formula",
        "In Q·K^T the encodings meet as cos θ1 cos θ2 + sin θ1 sin θ2 = cos(θ1 - θ2).",
        check="claim-004-relative-dot",
    ),
    Item(
        "inv-004-08",
        "三角函数的频率线性减小",
        "statement",
        "As i grows the frequency falls linearly.",
        check="claim-004-linear-fall",
    ),
    Item(
        "inv-004-09",
        "使得频率的变化范围永远在[1/10000, 1]区间",
        "statement",
        "Normalised by d, the frequencies always span [1/10000, 1].",
        check="claim-004-frequency-range",
    ),
    Item(
        "inv-004-10",
        "这样不同的$d$也能具有相同的编码属性",
        "reason",
        "Dividing by d gives different d the same encoding properties.",
        check="claim-004-same-properties",
    ),
    Item(
        "inv-004-11",
        "为什么奇偶位置要设计为正余弦",
        "reason",
        "Even/odd dims are sin/cos so that Q·K builds cos(A - B): the relative distance.",
        check="claim-004-pairing",
    ),
    Item(
        "inv-004-12",
        "那么我们就可以用256个不同的频率",
        "worked example",
        "With d = 512 there are 256 different frequencies.",
        check="claim-004-frequency-count",
    ),
    Item(
        "inv-004-13",
        "exp(2 * i / d) * log(10000)",
        "formula",
        "The code's comment: 1/10000^(2i/d) = exp(2i/d)·log(10000).",
        check="claim-004-comment",
    ),
    Item(
        "inv-004-14",
        "def absolute_positional_encoding(",
        "code",
        "This function computes the absolute (sinusoidal) encoding.",
        check="claim-004-code",
    ),
)

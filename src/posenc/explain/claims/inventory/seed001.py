"""Inventory of seed 001 (a generated overview: RNNs, attention, sinusoidal and learned)."""

from __future__ import annotations

from posenc.explain.claims.inventory.item import Item

SEED = "001_bcee35876cb4abfa.txt"

ITEMS = (
    Item(
        "inv-001-01",
        "因此提出了门控循环单元（GRU），LSTM",
        "statement",
        "GRU and LSTM were proposed because RNNs model long-range dependencies poorly.",
        not_checkable="history; and told in the wrong order: LSTM (1997) and GRU (2014) "
        "predate the spread of self-attention the paragraph starts from",
    ),
    Item(
        "inv-001-02",
        "它可以帮助RNN学习到全局模式的信息",
        "statement",
        "A positional encoding helps an RNN learn global patterns (improves RNN performance).",
        check="claim-001-rnn",
    ),
    Item(
        "inv-001-03",
        "Transformer是一种基于Self-Attention机制的自编码器网络",
        "statement",
        "The Transformer is a self-attention autoencoder network, proposed by Google in 2017.",
        not_checkable="history and naming; 'autoencoder' is a misnomer: Vaswani et al.'s "
        "model is an encoder-decoder",
    ),
    Item(
        "inv-001-04",
        "第二部分是一个Positional Encoding层",
        "statement",
        "Each block has two sub-modules: multi-head attention, then a positional-encoding layer.",
        check="claim-001-every-block",
    ),
    Item(
        "inv-001-05",
        "在每个Block之后有一个Layer Norm层",
        "statement",
        "One LayerNorm follows each block, to scale its output.",
        check="claim-001-layernorm",
    ),
    Item(
        "inv-001-06",
        "Positional Encoding可以充分考虑到位置编码的信息",
        "comparison",
        "Compared with sinusoidal and learned embeddings, 'Positional Encoding' uses position "
        "information fully.",
        not_checkable="self-referential: the methods it is compared with are positional "
        "encodings; no third method is defined to measure",
    ),
    Item(
        "inv-001-07",
        "能够较好地捕获序列内长距离依赖关系，且无需学习参数",
        "comparison",
        "Positional encoding captures long-range dependencies better and needs no learned "
        "parameters.",
        check="claim-001-long-range",
    ),
    Item(
        "inv-001-08",
        "由于不同输入特征的长度可能不一致",
        "reason",
        "Scores are divided by sqrt(d_k) because input features may differ in length, so that "
        "all of them take part.",
        check="claim-001-sqrt-dk",
    ),
    Item(
        "inv-001-09",
        r"softmax(\frac{QK^T}{\sqrt{d_k}})V",
        "formula",
        "Attention(Q, K, V) = softmax(QK^T / sqrt(d_k)) V.",
        check="claim-001-attention-formula",
    ),
    Item(
        "inv-001-10",
        "$n$ 表示源序列长度，$m$ 表示目标序列长度",
        "statement",
        "In Q ∈ R^(n×d_q), K ∈ R^(m×d_k), n is the source length and m the target length.",
        check="claim-001-source-target",
    ),
    Item(
        "inv-001-11",
        "这是最早提出的Positional Encoding方法",
        "statement",
        "The sine-cosine encoding was the first positional encoding proposed.",
        not_checkable="history; learned position embeddings (ConvS2S, Gehring et al. 2017) "
        "came as early, and Vaswani et al. compared with them",
    ),
    Item(
        "inv-001-12",
        r"sin(pos/10000^{(2i/dim)})",
        "formula",
        "PE(pos, 2i) = sin(pos/10000^(2i/dim)), PE(pos, 2i+1) = cos(pos/10000^(2i/dim)).",
        check="claim-001-formula",
    ),
    Item(
        "inv-001-13",
        "还可将位置编码乘上一个可训练的参数进行调节",
        "statement",
        "The encoding can be multiplied by a trainable parameter to adjust it.",
        check="claim-001-trainable-scale",
    ),
    Item(
        "inv-001-14",
        "例如加入均匀噪声",
        "statement",
        "Uniform noise ε ~ U[-1/2, 1/2] can be added: PE(pos, i) = pos_ij + ε_ij.",
        check="claim-001-noise",
    ),
    Item(
        "inv-001-15",
        r"PE=\left[\begin{array}{cccc}",
        "formula",
        "The PE matrix written out: rows sin/cos(p_t/10000^(2r/d)), sin/cos(p_t/10000^(4r/d)).",
        check="claim-001-matrix-as-written",
    ),
    Item(
        "inv-001-16",
        "这里的Embedding层的参数是要学到的，而不是随机初始化的",
        "statement",
        "The learned encoding's parameters are learned rather than randomly initialised.",
        check="claim-001-learned-init",
    ),
    Item(
        "inv-001-17",
        r"\sum_{j=1}^{J-1} \beta_{j}f(pos_{t}-j)",
        "formula",
        "Learned encoding PE_t = ψ(pos'_t) + Σ_{j=1}^{J-1} β_j f(pos_t - j)·w_j, J a window.",
        check="claim-001-window",
    ),
    Item(
        "inv-001-18",
        "一般取值为5或7",
        "statement",
        "The window J is usually 5 or 7.",
        not_checkable="no source: no published learned encoding with such a window is named, "
        "and a customary value cannot be measured",
    ),
    Item(
        "inv-001-19",
        "如果仅仅只用位置编码，可能会丢失之前的信息",
        "reason",
        "The window term keeps earlier information, which the encoding alone would lose.",
        check="claim-001-window-reason",
    ),
    Item(
        "inv-001-20",
        "可以广泛应用到所有Encoder层，而不需要对每个单词增加位置信息",
        "statement",
        "The encoding applies in all encoder layers instead of adding position to each word.",
        check="claim-001-every-block",
    ),
)

"""Inventory of seed 002 (a long tutorial: why, worked table, extrapolation, relative code)."""

from __future__ import annotations

from posenc.explain.claims.inventory.item import Item

SEED = "002_194117be01fb43d6.txt"

ITEMS = (
    Item(
        "inv-002-01",
        "如果W < 1, 且是长距离依赖",
        "statement",
        "In an RNN, with W < 1 over a long dependency the repeated product of W becomes tiny.",
        check="claim-002-rnn-vanishing",
    ),
    Item(
        "inv-002-02",
        "在2017年,Google提出了Transformer",
        "statement",
        "Google proposed the Transformer in 2017, solving parallelism and long dependencies.",
        not_checkable="history and attribution; 'solved long dependencies' is an assessment",
    ),
    Item(
        "inv-002-03",
        "如果我们打乱输入词的顺序,Attention输出的加权和是一致的",
        "statement",
        "Without positions attention cannot perceive order: shuffled words, same weighted sums.",
        check="claim-002-order",
    ),
    Item(
        "inv-002-04",
        "模型将无法区分句子A和句子B",
        "worked example",
        "Without positions the model cannot tell '我 爱 编程' from '编程 爱 我'.",
        check="claim-002-order",
    ),
    Item(
        "inv-002-05",
        "模型将无法区分短期和长期依赖关系",
        "statement",
        "Without positions the model cannot tell short-range from long-range dependencies.",
        check="claim-002-order",
    ),
    Item(
        "inv-002-06",
        "模型的学习能力和表达能力将受到限制,表现会下降",
        "statement",
        "Without positions the model's learning and expressive power, hence performance, drop.",
        how="arena: nope vs sinusoidal on copy / reverse / sort, causal and bidirectional",
    ),
    Item(
        "inv-002-07",
        "随着j增大,频率逐渐降低",
        "statement",
        "As the pair index j grows, the frequency falls.",
        check="claim-004-clock",
    ),
    Item(
        "inv-002-08",
        "pos=0,1,2三个位置,假设embedding维度d=4",
        "worked example",
        "The printed d = 4 table for positions 0, 1, 2 (approximate values).",
        check="claim-002-table",
    ),
    Item(
        "inv-002-09",
        "低纬度代表粗略信息,高纬度代表细节差别",
        "statement",
        "Low dims carry coarse (low-frequency) information, high dims fine detail; repeated in "
        "4.2, under the heatmap and in the PE / Learnable table.",
        check="claim-002-frequency-order",
    ),
    Item(
        "inv-002-10",
        "We chose the sinusoidal version because",
        "statement",
        "Vaswani et al. chose the sinusoid because it may let the model extrapolate.",
        not_checkable="attribution: a verbatim quote of the paper (§3.5); whether it "
        "extrapolates is inv-002-15",
    ),
    Item(
        "inv-002-11",
        "它可以通过重复的模型来表示新的位置",
        "reason",
        "The encoding is periodic, so a new, larger position looks like familiar ones.",
        check="claim-002-periodic-new",
    ),
    Item(
        "inv-002-12",
        "低频:表示位置值较小的部分",
        "statement",
        "Low frequency belongs to early positions, which change slowly; later ones change faster.",
        check="claim-002-later-faster",
    ),
    Item(
        "inv-002-13",
        "位置编码是通过固定的数学公式生成的,而不是学习到的",
        "reason",
        "Because it is a fixed formula, not learned, it can reason about longer sequences.",
        check="claim-002-sinusoidal-extrapolates",
    ),
    Item(
        "inv-002-14",
        "并不会出现“跳跃”或“不连续”的现象",
        "worked example",
        "Trained at 512 and run at 600, positions 513..600 show no jump or discontinuity.",
        check="claim-002-no-jump",
    ),
    Item(
        "inv-002-15",
        "可以自然地适应比训练时序列更长的情况",
        "statement",
        "The sinusoid adapts to sequences longer than in training with no retraining.",
        check="claim-002-sinusoidal-extrapolates",
    ),
    Item(
        "inv-002-16",
        "位置编码和词嵌入的维度是一样的,所以直接把它们相加即可",
        "reason",
        "Encoding and word embedding have the same size, so adding them is enough.",
        check="claim-002-add-same-size",
    ),
    Item(
        "inv-002-17",
        "word_embedding[pos]",
        "code",
        "input_embedding = word_embedding[pos] + positional_embedding[pos].",
        check="claim-002-input-line",
    ),
    Item(
        "inv-002-18",
        "来学习出词与词之间的相对位置关系",
        "statement",
        "Combining frequencies lets the model learn relative positions, not memorise absolute.",
        check="claim-002-relative-map",
    ),
    Item(
        "inv-002-19",
        "绝对位置编码会为每个词语分配一个唯一的编码",
        "statement",
        "An absolute encoding gives every word (position) a unique code.",
        check="claim-000-unique",
    ),
    Item(
        "inv-002-20",
        "它并未直接提供这种信息",
        "statement",
        "Absolute encodings do not directly provide relative position information.",
        check="claim-002-absolute-relative",
    ),
    Item(
        "inv-002-21",
        "尤其是在长序列中",
        "comparison",
        "Relative encodings capture dependencies well, especially on long sequences.",
        how="arena: t5 / alibi / rope / transformer_xl vs sinusoidal / learned trained at 128, "
        "evaluated at 128..1024 on copy, passkey and lm",
    ),
    Item(
        "inv-002-22",
        "而是依赖于它与其它词的距离",
        "statement",
        "With a relative encoding attention depends on the distance, not absolute positions.",
        check="claim-002-relative-distance",
    ),
    Item(
        "inv-002-23",
        "最著名的相对位置编码方法来自Transformer-XL",
        "statement",
        "The best-known relative encoding comes from Transformer-XL, a pioneering work.",
        not_checkable="history and opinion; Shaw et al. 2018 introduced relative encodings",
    ),
    Item(
        "inv-002-24",
        "句子A:他[看着]我",
        "reason",
        "'他看着我' vs '他盯着我' shows why relative positions are better.",
        not_checkable="opinion about language; the example cannot favour relative encodings: "
        "the absolute positions are the same in both sentences too",
    ),
    Item(
        "inv-002-25",
        "torch.randn(max_len, max_len)",
        "code",
        "Transformer-XL's relative bias: position_bias[:q_len, :k_len] of a learned table.",
        check="claim-002-transformer-xl",
    ),
    Item(
        "inv-002-26",
        "输出:相对位置偏置的 shape: torch.Size([50, 50])",
        "worked example",
        "The Transformer-XL snippet prints a bias of shape [50, 50].",
        check="claim-002-printed-shapes",
    ),
    Item(
        "inv-002-27",
        "nn.Embedding(2 * max_len - 1, num_heads)",
        "code",
        "T5's relative bias: nn.Embedding(2·max_len - 1, heads) indexed by i - j + max_len - 1.",
        check="claim-002-t5-deberta",
    ),
    Item(
        "inv-002-28",
        "torch.Size([50, 50, 8])",
        "worked example",
        "The T5 snippet prints a bias of shape [50, 50, 8].",
        check="claim-002-printed-shapes",
    ),
    Item(
        "inv-002-29",
        "提出了解耦位置和内容的相对位置编码方式,进一步提升了性能",
        "statement",
        "DeBERTa's disentangled relative encoding further improved performance.",
        not_checkable="attribution: the paper's benchmark results, not reproducible here",
    ),
    Item(
        "inv-002-30",
        "nn.Embedding(2 * max_len - 1, d_model)",
        "code",
        "DeBERTa's relative encoding: nn.Embedding(2·max_len - 1, d_model) by i - j.",
        check="claim-002-t5-deberta",
    ),
    Item(
        "inv-002-31",
        "torch.Size([50, 50, 256])",
        "worked example",
        "The DeBERTa snippet prints a bias of shape [50, 50, 256].",
        check="claim-002-printed-shapes",
    ),
    Item(
        "inv-002-32",
        "比如Performer",
        "statement",
        "Performer is another way to implement relative positions.",
        not_checkable="attribution; Performer (Choromanski et al. 2020) is a linear-attention "
        "approximation, not a relative position encoding",
    ),
    Item(
        "inv-002-33",
        "相比上面的方式,它更加的灵活",
        "comparison",
        "A learned encoding is more flexible (more expressive within the training length).",
        how="arena: learned vs sinusoidal, in-range accuracy / loss on copy, sort and lm",
    ),
    Item(
        "inv-002-34",
        "缺点是不能推广到没出现过的长句子",
        "statement",
        "Learned encodings do not generalize to longer sentences than seen in training.",
        check="claim-002-learned-cannot",
    ),
    Item(
        "inv-002-35",
        "更依赖训练数据的分布",
        "statement",
        "A learned encoding depends more on the distribution of the training data.",
        how="arena: train learned on lengths mostly < L/2; rows of rarely seen positions stay "
        "near their init and accuracy there drops",
    ),
    Item(
        "inv-002-36",
        "它的值更随机,有跳变,而且没有什么周期性",
        "statement",
        "A (trained) learned encoding is random-looking, jumpy and not periodic.",
        how="trained learned table from the arena: |p_(t+1) - p_t| / |p_t| and its spectrum "
        "over t against its init and the sinusoid",
    ),
)

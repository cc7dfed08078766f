"""The terms the Chinese pages use, following the five tutorials (posenc/explain/seeds/) where
they have one; the catalogs (zh.py) use these words and a test holds them to it.

English term -> Chinese term. Encoding names (rope, alibi, ...), paper titles, code and numbers
stay as they are.
"""

from posenc import verdict as V

GLOSSARY = {
    "positional encoding": "位置编码",
    "sinusoidal encoding": "正弦位置编码",
    "learned encoding": "可学习位置编码",
    "relative encoding": "相对位置编码",
    "absolute encoding": "绝对位置编码",
    "rotary encoding": "旋转位置编码",
    "attention": "注意力",
    "self-attention": "自注意力",
    "bias": "偏置",
    "query": "查询",
    "key": "键",
    "dimension": "维度",
    "vector": "向量",
    "dot product": "点积",
    "frequency": "频率",
    "wavelength": "波长",
    "phase": "相位",
    "binary": "二进制",
    "word embedding": "词嵌入",
    "extrapolation": "外推",
    "generalize": "泛化",
    "matrix": "矩阵",
    "head": "头",
    "position": "位置",
    "long-term decay": "远程衰减",
    "claim": "论断",
    "seed (tutorial)": "教程",
    V.HOLDS: "成立",
    V.CAVEAT: "有保留地成立",
    V.FAILS: "不成立",
    V.UNMEASURED: "本次未测量",
    V.ERROR: "出错",
    V.REPRODUCED: "已复现",
    V.NOT_REPRODUCED: "未复现",
    V.INCONCLUSIVE: "无定论",
    V.NOT_MEASURED: "未测量",
}

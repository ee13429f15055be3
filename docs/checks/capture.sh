#!/usr/bin/env bash
# Index builds and query runs of the demo corpus, for comparing two versions of the engine
# (run from the repository root of each version with its .venv; then compare_captures.py).
# usage: capture.sh OUTDIR
set -uo pipefail
OUT=$1; rm -rf "$OUT"; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GRAPHRAG_PROGRESS=0
GE=.venv/bin/graphrag-engine
$GE methods > "$OUT/methods.txt"
$GE index --demo --out "$OUT/index" 2> "$OUT/index.err"
cat > "$OUT/reports.yaml" <<'Y'
communities:
  enabled: true
  max_cluster_size: 6
  reports: true
  report_max_tokens: 100
models:
  llm:
    backend: transformers
    batch_size: 8
    parse_retries: 1
Y
$GE index --demo --out "$OUT/rindex" --config "$OUT/reports.yaml" 2> "$OUT/rindex.err"
methods="none naive bm25 hyde clue graphrag_global graphrag_local hipporag lego lightrag pankrag regraphrag rograg"
echo "$methods" > "$OUT/method_names.txt"
for m in $methods; do
  $GE query "$OUT/rindex" demo --method "$m" --retrieval-only --out "$OUT/runs/$m" > "$OUT/runs.$m.out" 2>&1
  echo "$m rc=$?" >> "$OUT/rcs.txt"
done
for m in naive pankrag rograg; do
  $GE query "$OUT/rindex" demo --method "$m" --limit 4 --llm-backend transformers --out "$OUT/llm/$m" > "$OUT/llm.$m.out" 2>&1
  echo "llm $m rc=$?" >> "$OUT/rcs.txt"
done
for n in bm25 clue clue_no_knowledge_anchoring clue_no_query_update clue_no_spreading_activation graphrag_global graphrag_local hipporag hyde instance_00 lightrag lightrag_ner naive none; do
  lf=configs/methods/$n.yaml; [ "$n" = instance_00 ] && lf=configs/lego/instance_00.yaml
  $GE query "$OUT/rindex" demo --method "$lf" --retrieval-only --out "$OUT/cfg/$n" > "$OUT/cfg.$n.out" 2>&1
  echo "cfg $n rc=$?" >> "$OUT/rcs.txt"
done
R=$OUT/runs
$GE eval $R/none $R/naive $R/bm25 $R/clue $R/graphrag_local $R/hipporag --out "$OUT/report" > "$OUT/eval.out" 2>&1; echo "eval rc=$?" >> "$OUT/rcs.txt"

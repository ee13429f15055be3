#!/usr/bin/env bash
# Index builds and query runs for comparing two versions of the engine: the demo corpus (plain,
# and with SmolLM2 community reports), and a MuSiQue dev slice with communities and extractive
# reports; every method's rankings and contexts, and SmolLM2 answers of every method on a few
# demo questions. Run from the repository root of each version with its .venv (PYTHONPATH set
# to that root when the .venv's editable install points elsewhere); then compare_captures.py.
# usage: capture.sh OUTDIR [SHARED_DATA]; CAPTURE_PHASES="index runs llm cfg eval" picks phases
# (a later phase reads what the earlier ones wrote into OUTDIR, which is kept)
set -uo pipefail
OUT=$1; DATA=${2:-../shared/data}; PHASES=${CAPTURE_PHASES:-index runs llm cfg eval}
has() { [[ " $PHASES " == *" $1 "* ]]; }
has index && rm -rf "$OUT"; mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GRAPHRAG_PROGRESS=0
GE=.venv/bin/graphrag-engine
PY=.venv/bin/python
if has index; then
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
# a MuSiQue dev slice: the first 12 questions and their paragraphs, communities with extractive reports
$PY - "$DATA" "$OUT" <<'P'
import json, sys
from pathlib import Path
data, out = Path(sys.argv[1]), Path(sys.argv[2])
qs = [json.loads(x) for x in (data / "musique_dev.jsonl").open()][:12]
want = {p for q in qs for p in q["context_passage_ids"]}
rows = [r for r in map(json.loads, (data / "musique_corpus.jsonl").open()) if r["id"] in want]
(out / "musique.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
(out / "musique_q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
P
printf 'communities:\n  enabled: true\n  max_cluster_size: 10\n' > "$OUT/mcomm.yaml"
$GE index "$OUT/musique.jsonl" --out "$OUT/mindex" --config "$OUT/mcomm.yaml" 2> "$OUT/mindex.err"
fi
methods=$($PY -c "from graphrag_engine.methods import method_names; print(' '.join(method_names()))")
echo "$methods" > "$OUT/method_names.txt"
has runs && for m in $methods; do
  $GE query "$OUT/rindex" demo --method "$m" --retrieval-only --out "$OUT/runs/$m" > "$OUT/runs.$m.out" 2>&1
  echo "$m rc=$?" >> "$OUT/rcs.txt"
  $GE query "$OUT/mindex" "$OUT/musique_q.jsonl" --method "$m" --retrieval-only --out "$OUT/mus/$m" > "$OUT/mus.$m.out" 2>&1
  echo "mus $m rc=$?" >> "$OUT/rcs.txt"
done
# SmolLM2 answers (and each method's own LLM stages) on two demo questions, in the demo's
# short answer window so that every method's prompts stay small on a CPU
has llm && for m in $methods; do
  printf 'method: %s\ngeneration:\n  max_context_tokens: 512\n  max_tokens: 24\nmodels:\n  llm:\n    backend: transformers\n    parse_retries: 1\n' "$m" > "$OUT/llm.$m.yaml"
  printf 'pankrag:\n  max_steps: 3\nrograg:\n  max_steps: 3\ngraphrag_global:\n  community_level: 0\n  map_max_tokens: 64\n' \
    | awk -v m="$m" '$0 == m":" {p = 1; print; next} /^[^ ]/ {p = 0} p' >> "$OUT/llm.$m.yaml"
  $GE query "$OUT/rindex" demo --method "$OUT/llm.$m.yaml" --limit 2 --out "$OUT/llm/$m" > "$OUT/llm.$m.out" 2>&1
  echo "llm $m rc=$?" >> "$OUT/rcs.txt"
done
has cfg && for n in bm25 clue clue_no_knowledge_anchoring clue_no_query_update clue_no_spreading_activation graphrag_global graphrag_local hipporag hyde instance_00 lightrag lightrag_ner naive none; do
  lf=configs/methods/$n.yaml; [ "$n" = instance_00 ] && lf=configs/lego/instance_00.yaml
  $GE query "$OUT/rindex" demo --method "$lf" --retrieval-only --out "$OUT/cfg/$n" > "$OUT/cfg.$n.out" 2>&1
  echo "cfg $n rc=$?" >> "$OUT/rcs.txt"
done
R=$OUT/runs
if has eval; then
  $GE eval $R/none $R/naive $R/bm25 $R/clue $R/graphrag_local $R/hipporag --out "$OUT/report" > "$OUT/eval.out" 2>&1
  echo "eval rc=$?" >> "$OUT/rcs.txt"
fi

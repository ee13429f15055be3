"""ReGraphRAG on MuSiQue dev (200 questions) over the LLM-free (alpha = 0) index: the structure
Algorithm 1 makes, the retrieval proxy next to the baselines, and batched vs one-at-a-time speed.

    .venv/bin/python -m bench.regraphrag [--work DIR] [--questions 200]
    .venv/bin/python -m bench.regraphrag --llm [--llm-questions N] [--sweep]
                                         [--llm-backend llama|transformers] [--batch-size 16]

Runs, from one `graphrag-engine query --retrieval-only` each (bench/method_runs.py's machinery,
the index shared with it under WORK/idx/musique): ReGraphRAG without perspective expansion
(LLM-free: the question is its only sub-query) with reorganization and reranking, then without
reorganization, then without reranking; BM25, dense, HippoRAG-style PPR and LightRAG-style
hybrid (NER keywords) beside them. Prints:

(a) structure per question: subgraphs, components after step 1 and step 2, path nodes and
    bridges added, connected components of the final node graph; and the shares of questions
    whose gold passages each mention an entity of that graph ("reached") and all mention
    entities of one of its components ("connected");
(b) Recall@2/5 [95% CI] of the chunks behind the listed triplets, in prompt order, under the
    same section budget (`context_tokens`) for every variant;
(c) questions/s batched vs one question at a time (in process, same context object, the ratio),
    and the seconds of reorganization alone per question.

With `--llm` it sends the expansion prompts to the packaged SmolLM2, through a llama.cpp server
(`--llm-threads`) or in process with llguidance (`--llm-backend transformers --batch-size N`),
and adds, on the first `--llm-questions` questions, the variants with perspective expansion (full, w/o
Reorg, w/o Rerank; with `--sweep` also m = 1..6 at n = 3 and n = 1..4 at m = 4), all sharing
one LLM response cache (WORK/expansion_cache.sqlite: a re-run resumes), next to the LLM-free
rows and the baselines on the same questions, with the expansion's cost per question: its
fallback share and LLM tokens. A 135M model's sub-queries make these rows a floor.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench import method_runs
from bench.common import work_dir, write_result

VARIANTS = {
    "rg_noexp": ("ReGraphRAG w/o P-exp (LLM-free)", "configs/methods/regraphrag.yaml")
    + ("expansion: false",),
    "rg_noexp_noreorg": ("  ... and w/o Reorg", "configs/methods/regraphrag.yaml")
    + ("expansion: false", "reorganize: false"),
    "rg_noexp_norerank": ("  ... and w/o Rerank", "configs/methods/regraphrag.yaml")
    + ("expansion: false", "rerank: false"),
}
BASELINES = ["bm25", "naive", "hipporag", "lr_hybrid"]
STRUCTURE = ["subgraphs", "after_paths", "after_bridges", "path_nodes_added", "bridges_added"]
STRUCTURE += ["node_components", "triplets"]
GOLD = ["reached", "connected"]  # shares of questions (gold_connected)


def structure(rows: list[dict]) -> dict[str, float]:
    """Mean of each structure figure over a run's questions."""
    extras = [r["extras"] for r in rows]
    return {k: round(sum(e[k] for e in extras) / len(extras), 2) for k in STRUCTURE}


def entity_passages(index: Path) -> list[set[str]]:
    """For each entity row of the index's entity graph, the passages that mention it."""
    from graphrag_engine.methods import query_config
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.retrieve.entity_graph import entity_graph
    from graphrag_engine.store import open_index

    # the run folder is where an LLM would keep its cache; the entity graph needs none, so
    # nothing is written there
    ctx = QueryContext(open_index(index), query_config("regraphrag"), Path("/tmp/rg-gold"))
    passage = ctx.chunks["passage"]
    return [{passage[c] for c in rows.tolist()} for rows in entity_graph(ctx).entity_chunks]


def gold_connected(mentioned_in: list[set[str]], rows: list[dict]) -> dict[str, float]:
    """Over a run's questions: the share whose gold passages each contain an entity of the
    reorganized graph ("reached"), and the share whose gold passages all contain an entity of
    one connected component of it ("connected"; the graph is every perspective's nodes and
    triplets together, from the run's `components` extras)."""
    reached = connected = 0
    for r in rows:
        gold = set(r["supporting_ids"] or [])
        parts = [set().union(*(mentioned_in[e] for e in c)) for c in r["extras"]["components"]]
        reached += bool(gold) and gold <= set().union(*parts)
        connected += any(bool(gold) and gold <= p for p in parts)
    return {"reached": round(reached / len(rows), 3), "connected": round(connected / len(rows), 3)}


def run_figures(mentioned_in: list[set[str]], run: Path) -> dict[str, dict[str, float]]:
    """A run's structure with its gold shares, and its expansion cost, from one read."""
    rows = method_runs.run_rows(run)
    return {
        "structure": structure(rows) | gold_connected(mentioned_in, rows),
        "expansion": expansion_cost(rows),
    }


def speed(index: Path, questions: int, cache: Path | None = None) -> dict[str, float]:
    """Batched vs one at a time, in process, for the full variant: LLM-free (no expansion), or
    with expansion whose SmolLM2 answers all come from the response `cache` of an earlier run
    (so the figures time the engine's retrieval, Algorithm 1 and reranking, not the LLM)."""
    from graphrag_engine.config import LLMConfig
    from graphrag_engine.eval.datasets import load_questions
    from graphrag_engine.methods import query_config
    from graphrag_engine.methods.regraphrag import regraphrag
    from graphrag_engine.retrieve.context import QueryContext
    from graphrag_engine.store import open_index

    qs = load_questions(str(method_runs.DATA / "musique_dev.jsonl"), limit=questions)
    cfg = query_config("regraphrag")
    cfg.generation.enabled = False
    cfg.options.expansion = cache is not None
    if cache is not None:
        cfg.models.llm = LLMConfig(backend="transformers", cache=str(cache))
    ctx = QueryContext(open_index(index), cfg, Path(work_dir("regraphrag-speed")))
    figures, clock = method_runs.batched_vs_single(regraphrag, ctx, qs)
    ledger = ctx.llm.ledger.summary() if cache is not None else {}
    fitting = {} if cache is not None else {"answer_stage_fit": answer_fit(ctx, qs)}
    return (
        figures
        | {
            "reorganize_ms_per_question": round(1000 * clock.seconds["reorganize"] / len(qs), 2),
            "rerank_ms_per_question": round(1000 * clock.seconds["rerank"] / len(qs), 2),
        }
        | ({"llm_ledger": ledger} if ledger else {})
        | fitting
    )


FIT_BUDGET = 16_000
"""ReGraphRAG's context budget (`regraphrag.context_tokens`): the answer stage fits to it."""


def answer_fit(ctx, qs: list) -> dict[str, float]:
    """The answer stage's fitting of every question's context to FIT_BUDGET tokens, ms a
    question: from the counts its sections carry (the stored line counts the budget read),
    against encoding every item of every context anew per question (the reference: fitting
    without kept counts), in the same run; the fitted contexts must be equal."""
    import time

    from graphrag_engine.methods.regraphrag import regraphrag
    from graphrag_engine.retrieve.answer import fit_context, fit_sections
    from graphrag_engine.retrieve.types import Context, StageClock

    contexts = []
    for lo in range(0, len(qs), ctx.cfg.batch_size):
        contexts += regraphrag(ctx, qs[lo : lo + ctx.cfg.batch_size], StageClock()).contexts

    def encoded_anew(context: Context) -> Context:
        flat = [t for s in context.sections for t in s.items]
        sizes = [len(e.ids) for e in ctx.tokenizer.encode_batch(flat)] if flat else []
        counts, start = [], 0
        for s in context.sections:
            c = sizes[start : start + len(s.items)]
            start += len(s.items)
            if s.title and c:
                c[0] += len(ctx.tokenizer.encode_batch([s.title])[0].ids)
            counts.append(c)
        return Context(fit_sections(context.sections, counts, FIT_BUDGET), context.preset_answer)

    def timed(fit) -> tuple[float, list]:
        started = time.perf_counter()
        fitted = [fit(c) for c in contexts]
        return 1000 * (time.perf_counter() - started) / len(contexts), fitted

    kept_ms, kept = timed(lambda c: fit_context(c, ctx.count_tokens, FIT_BUDGET))
    anew_ms, anew = timed(encoded_anew)
    if kept != anew:
        raise AssertionError("fitting from kept counts changed a fitted context")
    lines = sum(len(s.items) for c in contexts for s in c.sections)
    return {
        "questions": len(contexts),
        "context_lines_per_question": round(lines / len(contexts), 1),
        "kept_counts_ms_per_question": round(kept_ms, 3),
        "encoded_anew_ms_per_question": round(anew_ms, 3),
        "anew_over_kept": round(anew_ms / kept_ms, 1),
    }


EXPANSION_CACHE = "expansion_cache.sqlite"
"""The LLM variants' shared response cache under WORK: a re-run resumes from it."""
LLM_VARIANTS = {  # run name: (label, `key: value` lines for the regraphrag section)
    "rg_full": ("ReGraphRAG full (SmolLM2 expansion)", ()),
    "rg_noreorg": ("  w/o Reorg", ("reorganize: false",)),
    "rg_norerank": ("  w/o Rerank", ("rerank: false",)),
}
SWEEP = {f"rg_m{m}_n3": (f"  m = {m}, n = 3", (f"perspectives: {m}",)) for m in (1, 2, 3, 5, 6)}
SWEEP |= {f"rg_m4_n{n}": (f"  m = 4, n = {n}", (f"sub_queries: {n}",)) for n in (1, 2, 4)}


def expansion_cost(rows: list[dict]) -> dict[str, float]:
    """Share of a run's questions whose expansion fell back, mean expansion tokens per question,
    and the mean tokens of the context the answer prompt would carry (the paper's Table 4 token
    cost is expansion plus prompt)."""
    from graphrag_engine.models.tokenizer import load_tokenizer

    llm = [r["tokens"] for r in rows]
    texts = ["\n".join(r["context_text"] or []) for r in rows]
    context = [len(e.ids) for e in load_tokenizer().encode_batch(texts)]
    extras = [r["extras"] for r in rows]
    return {
        "fallback": round(sum(bool(e.get("expansion_fallback")) for e in extras) / len(rows), 3),
        "tokens": round(sum((x or {}).get("perspectives", 0) for x in llm) / len(rows), 1),
        "context_tokens": round(sum(context) / len(rows), 1),
    }


def with_llm(work: Path, limit: int, local: method_runs.LocalLLM, sweep: bool) -> list[dict]:
    """The expansion variants next to the LLM-free ones and the baselines, on the first
    `limit` questions; rows with R@2/R@5 and CIs, structure and expansion cost."""
    variants = LLM_VARIANTS | (SWEEP if sweep else {})
    base = "configs/methods/regraphrag.yaml"
    others = [*VARIANTS, *BASELINES]
    rows = method_runs.run_with_llm(
        work, "llm", limit, local, base, variants, others, EXPANSION_CACHE
    )
    mentioned_in = entity_passages(work / "idx" / "musique")
    for row in rows:
        run = Path(row["run"])
        if run.name.startswith("rg_"):
            row |= run_figures(mentioned_in, run)
    return rows


def print_llm_rows(rows: list[dict]) -> None:
    """The expansion tables: recall with CIs and cost; then the structure per variant."""
    print(f"\n(d) with SmolLM2 perspective expansion, first {rows[0]['questions']} questions")
    print(
        f"{'variant':<38}{'R@2 [95% CI]':<24}{'R@5 [95% CI]':<24}"
        f"{'fallback':>9}{'exp tok/q':>10}{'ctx tok/q':>10}"
    )
    for r in rows:
        cells = [method_runs.recall_cell(r, k) for k in (2, 5)]
        ex = r.get("expansion", {})
        print(
            f"{r['method']:<38}{cells[0]:<24}{cells[1]:<24}{ex.get('fallback', ''):>9}"
            f"{ex.get('tokens', ''):>10}{ex.get('context_tokens', ''):>10}"
        )
    head = "".join(f"{k[:12]:>13}" for k in STRUCTURE + GOLD)
    print(f"\n{'structure, mean per question; gold shares':<38}{head}")
    for r in rows:
        if "structure" in r:
            cells = "".join(f"{r['structure'][k]:>13}" for k in STRUCTURE + GOLD)
            print(f"{r['method']:<38}{cells}")


def main() -> None:
    """Index (shared), run, evaluate, time; print the three tables and a JSON line."""
    ap = method_runs.llm_bench_parser(
        __doc__.splitlines()[0], "add the perspective-expansion variants", 200
    )
    ap.add_argument("--sweep", action="store_true", help="with --llm: m = 1..6 and n = 1..4")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    if args.llm:
        method_runs.METHODS.update(VARIANTS)
        rows = with_llm(work, args.llm_questions, method_runs.LocalLLM.of(args), args.sweep)
        print_llm_rows(rows)
        cache = work / EXPANSION_CACHE
        fast = speed(work / "idx" / "musique", args.llm_questions, cache)
        print("\n(c) speed with expansion (answers from the cache):", json.dumps(fast))
        write_result("regraphrag", {"llm_rows": rows, "speed": fast}, tag="llm")
        return
    method_runs.METHODS.update(VARIANTS)
    methods = [*VARIANTS, *BASELINES]
    rows = method_runs.run_set("musique", work, methods)
    runs = work / "runs" / "musique"
    print("(a) structure, mean per question (MuSiQue dev, LLM-free index, one sub-query)")
    print(f"{'variant':<36}" + "".join(f"{k[:12]:>13}" for k in STRUCTURE + GOLD))
    shapes = {}
    mentioned_in = entity_passages(work / "idx" / "musique")
    for v in VARIANTS:
        shapes[v] = run_figures(mentioned_in, runs / v)["structure"]
        print(f"{VARIANTS[v][0]:<36}" + "".join(f"{shapes[v][k]:>13}" for k in STRUCTURE + GOLD))
    print("\n(b) Recall of the chunks behind the context (95% CI)")
    for r in rows:
        cells = [method_runs.recall_cell(r, k) for k in (2, 5)]
        print(f"{r['method']:<36}{cells[0]:<24}{cells[1]:<24}{r['q_per_s']:>8} q/s")
    fast = speed(work / "idx" / "musique", args.questions)
    print("\n(c) speed:", json.dumps(fast))
    write_result("regraphrag", {"structure": shapes, "rows": rows, "speed": fast})


if __name__ == "__main__":
    main()

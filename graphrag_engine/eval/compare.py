"""Two runs of the same questions compared question by question: paired differences with a
sign-flip permutation test on the questions both runs answered."""

from __future__ import annotations

from pathlib import Path

from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.metrics import (
    paired_test,
)
from graphrag_engine.eval.report import load_run, metric_order, score_rows, write_csv


def compare_runs(run_a: str, run_b: str, out: str | Path, ks: list[int]) -> Path:
    """Paired differences (B - A) of every shared metric over the questions both runs hold."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (la, _, ra), (lb, _, rb) = load_run(run_a), load_run(run_b)
    common = sorted({r["qid"] for r in ra} & {r["qid"] for r in rb})
    if not common:
        raise BadInputError(f"eval --compare: {run_a} and {run_b} share no question ids")
    by_a = {r["qid"]: r for r in ra}
    by_b = {r["qid"]: r for r in rb}
    sa = score_rows([by_a[q] for q in common], ks)
    sb = score_rows([by_b[q] for q in common], ks)
    rows = []
    for m in sorted(set(sa) & set(sb), key=metric_order):
        t = paired_test(sa[m], sb[m])
        rows.append({"metric": m, **t})
    lines = [
        f"# {lb} vs {la}",
        "",
        f"{len(common)} shared questions; difference = {lb} - {la}; 95% bootstrap interval; "
        "p from a paired sign-flip permutation test (10,000 draws).",
        "",
        "| metric | n | difference | 95% CI | p |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['metric']} | {r['n']} | {r['mean_diff']:+.4f} | "
            f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | {r['p_value']:.4f} |"
        )
    write_csv(out / "compare.csv", rows)
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    return out / "compare.md"

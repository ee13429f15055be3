"""The evaluation report as one self-contained HTML page to browse: the summary table (sortable,
with intervals), the cost table and the plots inline, and a page per question with, for every
run, its ranked passages (gold ones marked), its context as the model saw it, its answer,
tokens and seconds. No network and no script from elsewhere; every text from a run (questions,
contexts, model answers) is escaped, and the page's own script only shows, hides and sorts."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphrag_engine.eval.run_rows import ResultRun

HTML_BYTES = 64 * 2**20
"""Question pages are written until the page holds about this much; the rest are counted on
it and listed in per_question.csv (a run of 16,000-token contexts over thousands of questions
would otherwise make a page no browser opens)."""

HTML_QUESTIONS = 2000
"""At most this many questions get a page (the first ones of the first run): their rows are
read for the page, every other question's only streamed for its scores."""

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:78em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em}
th{background:#f3f3f3}table.sortable th{cursor:pointer}th.sorted-down::after{content:" \\25BC"}
th.sorted-up::after{content:" \\25B2"}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ci{color:#777;font-size:.85em}img{max-width:100%;border:1px solid #eee;margin:.4em 0}
.gold{background:#fff3b0;font-weight:600}pre{white-space:pre-wrap;background:#f8f8f8;
padding:.6em;max-height:28em;overflow:auto;font-size:12px}details{margin:.3em 0 .8em}
section.run{border-top:2px solid #ddd;margin-top:1em}.answer{font-size:1.05em}
a.back{display:inline-block;margin:.5em 0}
"""

SCRIPT = """
function show() {
  var id = decodeURIComponent(location.hash.slice(1));
  var page = id.indexOf('q-') === 0 ? document.getElementById(id) : null;
  document.getElementById('overview').hidden = page !== null;
  document.querySelectorAll('section.question').forEach(function (s) { s.hidden = s !== page; });
  window.scrollTo(0, 0);
}
function sortBy(th) {
  var table = th.closest('table'), body = table.tBodies[0];
  var col = Array.prototype.indexOf.call(th.parentNode.children, th);
  var down = !th.classList.contains('sorted-down');
  table.querySelectorAll('th').forEach(function (h) { h.className = ''; });
  th.className = down ? 'sorted-down' : 'sorted-up';
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = a.cells[col].dataset.sort, y = b.cells[col].dataset.sort;
    var nx = parseFloat(x), ny = parseFloat(y), c;
    if (isNaN(nx) && isNaN(ny)) c = String(x).localeCompare(String(y));
    else if (isNaN(nx)) return 1; else if (isNaN(ny)) return -1; else c = nx - ny;
    return down ? -c : c;
  });
  rows.forEach(function (r) { body.appendChild(r); });
}
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.addEventListener('click', function () { sortBy(th); });
});
window.addEventListener('hashchange', show);
show();
"""


def e(value: Any) -> str:
    """Text from a run (or anything else) made safe inside HTML, quotes included."""
    return html.escape("" if value is None else str(value), quote=True)


def write_html(
    path: Path,
    runs: list[str],
    top: list[str],
    table: dict[str, dict[str, tuple[float, float, float, int]]],
    cost_lines: list[str],
    images: list[tuple[str, Path]],
    opened: list[ResultRun],
    scores: dict[str, dict[str, Sequence[float]]],
) -> None:
    """Write the report page at `path` from what `evaluate_runs` computed (see the module)."""
    labels = [r.label for r in opened]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        "<title>Evaluation report</title><style>" + STYLE + "</style></head><body>",
        "<div id='overview'><h1>Evaluation report</h1>",
        "<p>Runs: " + ", ".join(f"<code>{e(r)}</code>" for r in runs) + "</p>",
        "<p>Mean per question (%, except tokens), 95% bootstrap interval below each figure. "
        "Click a column's name to sort by it; click a question to see what every run "
        "retrieved and answered.</p>",
        summary_table(labels, top, table),
        markdown_table(cost_lines),
        *(
            f"<h3>{e(title)}</h3><img alt='{e(title)}' src='data:image/png;base64,"
            + base64.b64encode(png.read_bytes()).decode()
            + "'>"
            for title, png in images
        ),
    ]
    questions = opened[0].rows(HTML_QUESTIONS) if opened else []
    shown = {q["qid"] for q in questions}
    rows_by_run = {r.label: r.positions(shown) for r in opened[1:]}
    if opened:
        rows_by_run[labels[0]] = {q["qid"]: (j, q) for j, q in enumerate(questions)}
    total = opened[0].n if opened else 0
    pages: list[str] = []
    size = sum(map(len, parts))
    for i, first in enumerate(questions):
        page = question_page(i, first, labels, rows_by_run, scores)
        if size + len(page) > HTML_BYTES:
            break
        pages.append(page)
        size += len(page)
    parts.append(question_index(questions[: len(pages)], labels, rows_by_run, scores))
    if len(pages) < total:
        parts.append(
            f"<p>{total - len(pages)} more questions are not on this page (it shows at most "
            f"{HTML_QUESTIONS:,} and stays under {HTML_BYTES // 2**20} MB); per_question.csv "
            "lists every one.</p>"
        )
    parts += ["</div>", *pages, "<script>" + SCRIPT + "</script></body></html>"]
    path.write_text("".join(parts), encoding="utf-8")


def _interval(mean: float, lo: float, hi: float, scale: float) -> str:
    """A table cell's figure and its interval, or a dash without one."""
    if math.isnan(mean):
        return "–"
    digits = 1 if scale == 100.0 else 0
    return (
        f"{mean * scale:.{digits}f}<br><span class='ci'>[{lo * scale:.{digits}f}, "
        f"{hi * scale:.{digits}f}]</span>"
    )


def summary_table(labels: list[str], top: list[str], table: dict) -> str:
    """The runs by the report's first metrics, each cell sortable by its mean."""
    head = "".join(f"<th>{e(m)}</th>" for m in ["run", *top])
    body = []
    for label in labels:
        cells = [f"<td data-sort='{e(label)}'>{e(label)}</td>"]
        for m in top:
            mean, lo, hi, _ = table[m][label]
            scale = 1.0 if m.startswith("query_tokens") else 100.0
            key = "" if math.isnan(mean) else f"{mean:.6g}"
            cells.append(f"<td class='num' data-sort='{key}'>{_interval(mean, lo, hi, scale)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<h2>Summary</h2><table class='sortable' id='summary'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def markdown_table(lines: list[str]) -> str:
    """A report.md section (a `## title` line, then a Markdown table) as a sortable table."""
    title = next((ln[3:] for ln in lines if ln.startswith("## ")), "")
    rows = [ln.strip().strip("|").split("|") for ln in lines if ln.startswith("|")]
    rows = [[c.strip() for c in r] for r in rows if not set("".join(r)) <= set("-: ")]
    if not rows:
        return ""
    head = "".join(f"<th>{e(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td data-sort='{e(_number(c))}'>{e(c)}</td>" for c in r) + "</tr>"
        for r in rows[1:]
    )
    return (
        f"<h2>{e(title)}</h2><table class='sortable'><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def _number(cell: str) -> str:
    """What a cell sorts by: its number where it is one (a percentage too), else its text."""
    try:
        return f"{float(cell.rstrip('%')):.6g}"
    except ValueError:
        return cell


def _recall(scores: dict[str, list[float]], i: int) -> float:
    """A question's Recall@5 in a run (else the largest k it has), nan without one."""
    keys = sorted((m for m in scores if m.startswith("recall@")), key=lambda m: int(m[7:]))
    key = "recall@5" if "recall@5" in scores else (keys[-1] if keys else None)
    values = scores.get(key, []) if key else []
    return values[i] if i < len(values) else math.nan


def question_index(
    questions: list[dict], labels: list[str], rows_by_run: dict, scores: dict
) -> str:
    """The list of questions, each a link to its page, with each run's recall beside it
    (`rows_by_run`: run -> question id -> (its position in the run, its row))."""
    head = "".join(f"<th>{e(m)}</th>" for m in ["#", "question", "gold answer", *labels])
    body = []
    for i, q in enumerate(questions):
        cells = [
            f"<td class='num' data-sort='{i}'>{i + 1}</td>",
            f"<td data-sort='{e(q['question'])}'><a href='#q-{i}'>{e(q['question'])}</a></td>",
            f"<td data-sort='{e(_gold(q))}'>{e(_gold(q))}</td>",
        ]
        for label in labels:
            j = rows_by_run[label].get(q["qid"], (None,))[0]
            r = math.nan if j is None else _recall(scores[label], j)
            shown = "–" if math.isnan(r) else f"{r:.2f}"
            cells.append(f"<td class='num' data-sort='{'' if math.isnan(r) else r}'>{shown}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<h2>Questions</h2><p>Each run's Recall@5 of the question's gold passages.</p>"
        f"<table class='sortable' id='questions'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _gold(row: dict) -> str:
    return " | ".join(row.get("gold_answers") or [])


def question_page(i: int, first: dict, labels: list[str], rows_by_run: dict, scores: dict) -> str:
    """One question: its gold answers and passages, then every run's passages, context, answer,
    tokens and seconds."""
    gold = set(first.get("supporting_ids") or [])
    parts = [
        f"<section class='question' id='q-{i}' hidden><a class='back' href='#'>&larr; all "
        f"questions</a><h2>{e(first['question'])}</h2>",
        f"<p>id <code>{e(first['qid'])}</code>; gold answer: <b>{e(_gold(first))}</b></p>",
        "<p>gold passages: "
        + (", ".join(f"<code class='gold'>{e(g)}</code>" for g in sorted(gold)) or "none given")
        + "</p>",
    ]
    for label in labels:
        if first["qid"] not in rows_by_run[label]:
            continue  # a run without this question (the report says which are shared)
        j, row = rows_by_run[label][first["qid"]]
        ranked = row.get("retrieved_ids") or []
        scores_row = row.get("retrieved_scores") or []
        items = "".join(
            f"<li{' class=gold' if pid in gold else ''}>{e(pid)}"
            + (f" <span class='ci'>{scores_row[k]:.3g}</span>" if k < len(scores_row) else "")
            + (" &#9733; gold" if pid in gold else "")
            + "</li>"
            for k, pid in enumerate(ranked)
        )
        tokens = sum((row.get("tokens") or {}).values())
        seconds = sum((row.get("seconds") or {}).values())
        context = "\n".join(row.get("context_text") or [])
        failed = row.get("answer_failed")
        answer = e(row.get("answer")) if not failed else f"<i>failed: {e(failed)}</i>"
        r = _recall(scores[label], j)
        parts.append(
            f"<section class='run' data-run='{e(label)}'><h3>{e(label)}</h3>"
            f"<p class='answer'>answer: {answer}</p>"
            f"<p>{tokens} LLM tokens, {seconds:.2f} s"
            + ("" if math.isnan(r) else f", Recall@5 {r:.2f}")
            + "</p>"
            f"<details open><summary>{len(ranked)} ranked passages</summary><ol>{items}</ol>"
            "</details><details><summary>context as the model saw it "
            f"({len(context):,} characters)</summary><pre>{e(context)}</pre></details></section>"
        )
    parts.append("</section>")
    return "".join(parts)

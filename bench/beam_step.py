"""Clue-RAG's beam step as the index grows: the unit lists of a real LLM-free MuSiQue index
tiled 1x, 4x and 16x (each copy of a unit keeps its entities and its vector, as the copies of
bench/scale.py's large corpora do, so every entity's degree grows with the index), Clue-RAG run
over MuSiQue dev questions on each, and every beam step it took replayed through the compiled
top-k (`CueAdjacency.top_units`) and through the flat gather, de-duplicate and sort it replaced
(the reference, in this file), in the same run: milliseconds per question, their ratio, the
growth from 1x to 16x, and how often the two keep the same units.

    .venv/bin/python -m bench.beam_step [--index DIR] [--scales 1,4,16] [--questions 200]

Without --index, MuSiQue's corpus is indexed LLM-free into the work folder first.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from bench.common import DATA, DEV_SETS, index_in_child, work_dir, write_result
from bench.llm_free import method_config, time_method
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.kernels.segments import csr_from_pairs, csr_gather, segment_topk
from graphrag_engine.kernels.similarity import rowwise_dot
from graphrag_engine.retrieve.context import QueryContext
from graphrag_engine.retrieve.cue_graph import CueAdjacency, cue_adjacency
from graphrag_engine.store import open_index

Step = tuple[np.ndarray, list[int], list[tuple[int, ...]], int]
"""One beam step: the items' query vectors, entities, paths and K."""


class RecordingAdjacency(CueAdjacency):
    """A cue adjacency that keeps every beam step asked of it, to replay them."""

    steps: list[Step]

    def top_units(self, queries, entities, exclude, vectors, k):  # noqa: D102, ANN001, ANN201
        self.steps.append((np.array(queries), list(entities), list(exclude), k))
        return super().top_units(queries, entities, exclude, vectors, k)


def tiled(adj: CueAdjacency, vectors: np.ndarray, copies: int) -> tuple[CueAdjacency, np.ndarray]:
    """The adjacency and unit vectors with every unit repeated `copies` times."""
    n_u, n_e = adj.unit_chunk.size, adj.ent_indptr.size - 1
    ents = np.repeat(np.arange(n_e), np.diff(adj.ent_indptr))
    e = np.tile(ents, copies)
    u = np.concatenate([adj.ent_units + c * n_u for c in range(copies)])
    ent_indptr, ent_units = csr_from_pairs(e, u, n_e)
    unit_indptr, unit_ents = csr_from_pairs(u, e, n_u * copies)
    out = RecordingAdjacency(
        ent_indptr, ent_units, unit_indptr, unit_ents, np.tile(adj.unit_chunk, copies)
    )
    out.steps = []
    return out, np.ascontiguousarray(np.tile(vectors, (copies, 1)))


def flat_reference(adj: CueAdjacency, vectors: np.ndarray, step: Step) -> np.ndarray:
    """The beam step as it ran before the compiled top-k: gather every (item, unit) candidate,
    de-duplicate and drop path units by sorting, score all of them, sort per item; returns
    (item, unit) rows."""
    queries, entities, exclude, k = step
    owner, slots = csr_gather(adj.ent_indptr, np.asarray(entities, dtype=np.int64))
    n = np.int64(adj.unit_chunk.size)
    keys = np.unique(owner * n + adj.ent_units[slots])
    on_path = [i * n + u for i, path in enumerate(exclude) for u in path]
    if on_path:
        keys = keys[~np.isin(keys, np.asarray(on_path, dtype=np.int64))]
    owner, units = keys // n, keys % n
    top = segment_topk(owner, rowwise_dot(queries, owner, vectors, units), k)
    return np.stack([owner[top], units[top]], axis=1)


def replay(adj: CueAdjacency, vectors: np.ndarray, steps: list[Step]) -> dict:
    """Seconds of both implementations over the recorded steps and their agreement."""
    compiled = reference = 0.0
    same = total = 0
    for step in steps:
        t0 = time.perf_counter()
        owner, units, _ = CueAdjacency.top_units(adj, *step[:3], vectors, step[3])  # unrecorded
        t1 = time.perf_counter()
        ref = flat_reference(adj, vectors, step)
        t2 = time.perf_counter()
        compiled, reference = compiled + t1 - t0, reference + t2 - t1
        got = {(int(o), int(u)) for o, u in zip(owner, units, strict=True)}
        want = {(int(o), int(u)) for o, u in ref}
        same += len(got & want)
        total += max(len(got), len(want))
    return {"compiled_s": compiled, "reference_s": reference, "same_units": same / max(total, 1)}


def main() -> None:
    """Index if needed, run Clue-RAG at each scale, replay its steps, write one result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default=None)
    ap.add_argument("--scales", default="1,4,16")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--work", default=work_dir("beam_step"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    corpus, dev = DEV_SETS["musique"]
    index_dir = Path(args.index) if args.index else work / "idx" / "musique"
    if not (index_dir / "manifest.json").exists():
        index_in_child(DATA / corpus, index_dir, "graph:\n  alpha: 0.0\n")
    index = open_index(index_dir)
    questions = load_questions(DATA / dev)[: args.questions]
    rows = []
    for scale in [int(s) for s in args.scales.split(",")]:
        ctx = QueryContext(index, method_config("clue", "cpu"), work / "runs")
        base = cue_adjacency(ctx)
        adj, vectors = tiled(base, ctx.unit_vectors, scale)
        ctx._memo["cue_adjacency"] = adj
        ctx.__dict__["unit_vectors"] = vectors
        ctx.__dict__["units"] = {k: v * scale for k, v in ctx.units.items()}
        timing = time_method(ctx, questions)
        steps = list(adj.steps)  # the warm-up batch's steps among them
        r = replay(adj, vectors, steps)
        ms = {k: 1000 * v / len(questions) for k, v in timing.stage_seconds.items()}
        rows.append(
            {
                "scale": scale,
                "units": int(adj.unit_chunk.size),
                "mean_entity_degree": round(float(np.diff(adj.ent_indptr).mean()), 1),
                "max_entity_degree": int(np.diff(adj.ent_indptr).max()),
                "clue_q_per_s": round(timing.rate, 1),
                "stage_ms_per_question": {k: round(v, 3) for k, v in ms.items()},
                "beam_steps": len(steps),
                "compiled_ms_per_question": round(1000 * r["compiled_s"] / len(questions), 3),
                "reference_ms_per_question": round(1000 * r["reference_s"] / len(questions), 3),
                "reference_over_compiled": round(r["reference_s"] / r["compiled_s"], 2),
                "same_units": round(r["same_units"], 4),
            }
        )
        print(rows[-1])
    first, last = rows[0], rows[-1]
    growth = {
        f"{key}_{last['scale']}x_over_{first['scale']}x": round(last[key] / first[key], 2)
        for key in ("compiled_ms_per_question", "reference_ms_per_question")
    }
    print(growth)
    write_result(
        "beam_step",
        {"bench": "beam_step", "questions": len(questions), "rows": rows, "growth": growth},
    )


if __name__ == "__main__":
    main()

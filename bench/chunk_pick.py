"""Which order the chunks behind the retrieved entities and relations take, decided on the
train sets: each train corpus (MuSiQue, HotpotQA) indexed once with today's defaults, then
LightRAG-style hybrid and mix (NER keys), ROGRAG's dual level (NER keys) and GraphRAG-style
local search (its text units, which PankRAG's specific steps share) with the chunks by cosine
to the question (LightRAG's VECTOR pick, now the default) and in the order their entities and
relations were found (the paper code's order, GraphRAG's text-unit order), with BM25 and
dense beside them: R@2 / R@5 with 95% bootstrap intervals and questions/s.

    .venv/bin/python -m bench.chunk_pick [--sets musique,hotpotqa] [--work DIR] [--reuse]

`--reuse` queries the train indexes this bench already built in WORK.
"""

from __future__ import annotations

from bench.common import write_result
from bench.descriptions import pick_on_train
from bench.llm_free import METHODS

DUAL_LEVEL = METHODS["rograg_dual_level_ner"][1]
RUNS = {
    "bm25": METHODS["bm25"],
    "naive": METHODS["naive"],
    "lightrag_hybrid_ner_vector": ("lightrag", {"keywords": "ner", "mode": "hybrid"}),
    "lightrag_hybrid_ner_weight": (
        "lightrag",
        {"keywords": "ner", "mode": "hybrid", "chunk_pick": "weight"},
    ),
    "lightrag_mix_ner_vector": ("lightrag", {"keywords": "ner", "mode": "mix"}),
    "lightrag_mix_ner_weight": (
        "lightrag",
        {"keywords": "ner", "mode": "mix", "chunk_pick": "weight"},
    ),
    "rograg_dual_level_ner_vector": ("rograg", DUAL_LEVEL),
    "rograg_dual_level_ner_found": ("rograg", {**DUAL_LEVEL, "chunk_pick": "found"}),
    "graphrag_local_vector": ("graphrag_local", {"text_unit_order": "vector"}),
    "graphrag_local_graphrag": ("graphrag_local", {"text_unit_order": "graphrag"}),
}
"""run name: (registered method, its settings)."""


def main() -> None:
    """Build each train index, query every run and write one result."""
    recall = pick_on_train("chunk_pick", RUNS, __doc__.splitlines()[0])
    write_result("chunk_pick", {"bench": "chunk_pick", "recall": recall})


if __name__ == "__main__":
    main()

"""How the graph methods reach the graph, decided on the train sets: HippoRAG's entity seeds
(the question's NER mentions linked to entities as in HippoRAG, the ends of the relations
nearest the question as in HippoRAG 2, or both; how many relations) and ReGraphRAG without
expansion (its subgraph's edges: the relations among the retrieved nodes, or every relation
touching them; either edge text; the chunks behind its triplets by cosine or triplet by
triplet), each train corpus (MuSiQue, HotpotQA) indexed once with today's defaults, BM25 and
dense beside them: R@2 / R@5 with 95% bootstrap intervals and questions/s.

    .venv/bin/python -m bench.graph_pick [--sets musique,hotpotqa] [--work DIR] [--reuse]

`--reuse` queries the train indexes this bench already built in WORK.
"""

from __future__ import annotations

from bench.common import write_result
from bench.descriptions import pick_on_train
from bench.llm_free import METHODS


def no_expansion(edges: str, edge_text: str, chunk_order: str) -> tuple[str, dict]:
    """ReGraphRAG without expansion, with these subgraph edges, edge text and chunk order."""
    settings = {"edges": edges, "edge_text": edge_text, "chunk_order": chunk_order}
    return "regraphrag", {"expansion": False, **settings}


RUNS = {
    "bm25": METHODS["bm25"],
    "naive": METHODS["naive"],
    "hipporag_link_entities": ("hipporag", {"link": "entities"}),
    "hipporag_link_facts_3": ("hipporag", {"link": "facts", "fact_top_k": 3}),
    **{
        f"hipporag_link_both_{k}": ("hipporag", {"link": "both", "fact_top_k": k})
        for k in (1, 2, 3, 5)
    },
    "regraphrag_no_expansion_among_relation": no_expansion("among", "relation", "prompt"),
    "regraphrag_no_expansion_incident_relation": no_expansion("incident", "relation", "vector"),
    "regraphrag_no_expansion_incident_relation_prompt_order": no_expansion(
        "incident", "relation", "prompt"
    ),
    "regraphrag_no_expansion_incident_with_ends": no_expansion("incident", "with_ends", "prompt"),
}
"""run name: (registered method, its settings)."""


def main() -> None:
    """Build each train index, query every run and write one result."""
    recall = pick_on_train("graph_pick", RUNS, __doc__.splitlines()[0])
    write_result("graph_pick", {"bench": "graph_pick", "recall": recall})


if __name__ == "__main__":
    main()

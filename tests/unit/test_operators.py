"""ROGRAG's operators on real values: 2Wiki gold dates, numbers with units, lists; values
that do not parse, and code-like model text, give a failed outcome, never a guess."""

from __future__ import annotations

import json
from datetime import date

import numpy as np

from graphrag_engine.methods.rograg.operators import (
    compare,
    count,
    difference,
    keep,
    split_items,
    total,
    union,
)


def test_compare_picks_the_label_on_dates_numbers_and_text() -> None:
    films = ("Forbidden Ground", "Free Guy")  # 2Wiki: their directors' dates of birth
    born = ("2 November 1932", "July 23, 1968")
    assert compare(films, born, "later").text == "Free Guy"  # "whose director is younger"
    assert compare(films, born, "earlier").text == "Forbidden Ground"
    assert compare(("a", "b"), ("6 ft", "1.9 m"), "greater").text == "b"
    assert compare(("a", "b"), ("$1.2 million", "$900,000"), "less").text == "b"
    assert compare(("a", "b"), ("American", "american "), "equal").text == "yes"
    assert compare(("a", "b"), ("French", "Italian"), "equal").text == "no"
    assert compare(("a", "b"), ("1990", "12 March 1990"), "earlier").ok is False  # undecided
    assert compare(("a", "b"), ("6 ft", "80 kg"), "greater").ok is False  # units differ


def test_arithmetic_count_union_and_filter() -> None:
    days = (date(2001, 5, 1) - date(1990, 3, 12)).days
    assert difference("12 March 1990", "1 May 2001").text == f"{days} days"
    assert difference("1988", "1974").text == "14 years"
    assert difference("3.5 km", "800 m").text == "2,700 m"
    assert difference("3.5 km", "80 kg").ok is False
    assert total(["1,200 people", "350 people", "50"]).text == "1,600"
    assert total(["12 m", "3 ft"]).text == "12.9144 m"
    assert count("Sweden, Norway and Denmark").text == "3"
    assert union(["Sweden, Norway", "Norway and Finland"]).items == ("Sweden", "Norway", "Finland")
    films = ["Truck Turner", "Boundaries of the Heart", "Krudt og klunker", "Untitled"]
    years = ["1974", "1988", "1958", "unknown"]
    out = keep(films, years, "later", "1970")
    assert out.items == ("Truck Turner", "Boundaries of the Heart")
    assert "no comparable value for Untitled" in out.text
    assert split_items("A; B\nC or A") == ["A", "B", "C"]


def test_code_like_model_text_is_only_text() -> None:
    planted = "__import__('os').system('touch /tmp/pwned')"
    out = compare(("a", "b"), (planted, "1990"), "earlier")
    assert not out.ok and "cannot compute" in out.text
    assert difference(planted, "x").ok is False
    assert count(planted).text == "1"  # one item: the text itself
    assert json.dumps(union([planted]).items) == json.dumps([planted.strip(" .")])


def test_bm25_gives_a_question_without_words_no_hits_and_ranks_the_rest() -> None:
    """A question of stop words, punctuation, an emoji or a NUL has no BM25 token: an empty
    ranking for it, the same ranking as alone for the others in its batch."""
    from graphrag_engine.retrieve.lexical import BM25Retriever

    bm25 = BM25Retriever(["The cat sat on the mat.", "A dog barked at the cat.", "Rain fell."])
    batch = bm25.search(["?", "where did the cat sit", "the of and", "\U0001f600\x00"], 3)
    assert (batch.ids[[0, 2, 3]] == -1).all() and (batch.scores[[0, 2, 3]] == 0).all()
    alone = bm25.search(["where did the cat sit"], 3)
    assert batch.ids[1].tolist() == alone.ids[0].tolist() and batch.ids[1][0] == 0
    assert (bm25.search(["!"], 3).ids == -1).all()


def test_bm25_ranks_as_bm25s_scores_every_chunk() -> None:
    """The compiled postings pass against bm25s's own dense scores of every chunk, sorted by
    (score desc, row asc): the same rows and scores to the last bit, on a corpus of short
    documents over a small vocabulary (many equal scores, ties cut at k), with repeated words in
    the questions and k past the documents a question touches."""
    import bm25s

    from graphrag_engine.retrieve.lexical import BM25Retriever

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 9))) for _ in range(300)]
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 6))) for _ in range(60)]
    queries += ["w1 w1 w2", "w39", "nothing here"]
    bm25 = BM25Retriever(texts)
    for k in (1, 10, 400):
        got = bm25.search(queries, k)
        for q, words_q in enumerate(bm25s.tokenize(queries, stopwords="en", return_ids=False)):
            ids = [bm25.model.vocab_dict[w] for w in words_q if w in bm25.model.vocab_dict]
            dense = bm25.model.get_scores(ids) if ids else np.zeros(len(texts), np.float32)
            order = np.lexsort((np.arange(len(texts)), -dense))
            order = order[dense[order] > 0][:k]
            assert got.ids[q, : order.size].tolist() == order.tolist(), (k, q)
            assert got.scores[q, : order.size].tobytes() == dense[order].tobytes(), (k, q)
            assert (got.ids[q, order.size :] == -1).all() and (
                got.scores[q, order.size :] == 0
            ).all()

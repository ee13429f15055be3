"""Fine-tune the bi-encoder for LEGO-GraphRAG's `bi-encoder-ft` scorer with a margin loss:
for a question q, a gold triple p of its graph and another triple n of the same graph,
    loss = max(0, margin - cos(q, p) + cos(q, n)),
starting from the packaged all-MiniLM-L6-v2; the result is a sentence-transformers folder that
configs/lego/instance_16.yaml and instance_20.yaml read from models/lego/bi-encoder-ft.

    .venv/bin/python bench/lego_finetune.py [--out models/lego/bi-encoder-ft]
                                            [--skip 600] [--epochs 1] [--margin 0.3]

It trains on WebQSP dev questions after the first `--skip` (bench/lego.py evaluates on the
first 200, so the two never overlap) and prints the held-out pairwise accuracy (gold triple
scored above a non-gold one) before and after, on the first 200 questions.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine.eval.datasets import load_questions  # noqa: E402
from engine.models.embed import packaged_minilm_path  # noqa: E402
from engine.retrieve.lego_modules import pretty_relation  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "webqsp_dev.jsonl"


def triple_text(t: list[str]) -> str:
    """A triple as the words the scorers see."""
    return f"{t[0]} {pretty_relation(t[1])} {t[2]}"


def examples(questions, rng: random.Random, per_question: int = 4) -> list[tuple[str, str, str]]:
    """(question, gold triple, other triple of the same graph) training triplets."""
    out = []
    for q in questions:
        gold = {tuple(t) for t in q.gold_triples}
        others = [t for t in q.triples or [] if tuple(t) not in gold]
        if not gold or not others:
            continue
        for _ in range(per_question):
            out.append(
                (
                    q.question,
                    triple_text(list(rng.choice(sorted(gold)))),
                    triple_text(rng.choice(others)),
                )
            )
    return out


def pair_accuracy(model, triplets) -> float:
    """Share of triplets whose gold triple scores above the other one."""
    q = model.encode([t[0] for t in triplets], normalize_embeddings=True)
    p = model.encode([t[1] for t in triplets], normalize_embeddings=True)
    n = model.encode([t[2] for t in triplets], normalize_embeddings=True)
    return float(np.mean((q * p).sum(1) > (q * n).sum(1)))


def main() -> None:
    """Train, report held-out accuracy, save."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "models" / "lego" / "bi-encoder-ft"))
    ap.add_argument("--skip", type=int, default=600)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--margin", type=float, default=0.3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    rng = random.Random(0)
    torch.manual_seed(0)
    questions = load_questions(DATA)
    train = examples(questions[args.skip :], rng)
    held = examples(questions[:200], random.Random(1), per_question=1)
    model = SentenceTransformer(packaged_minilm_path(), device="cpu", local_files_only=True)
    before = pair_accuracy(model, held)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    prep = getattr(model, "preprocess", None) or model.tokenize
    steps = 0
    for _ in range(args.epochs):
        rng.shuffle(train)
        for start in range(0, len(train), args.batch):
            batch = train[start : start + args.batch]
            emb = [
                torch.nn.functional.normalize(
                    model(dict(prep([b[i] for b in batch])))["sentence_embedding"],
                    dim=-1,
                )
                for i in range(3)
            ]
            pos, neg = (emb[0] * emb[1]).sum(-1), (emb[0] * emb[2]).sum(-1)
            loss = torch.relu(args.margin - pos + neg).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    model.eval()
    after = pair_accuracy(model, held)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    model.save(args.out)
    print(
        f"{len(train)} training triplets, {steps} steps; held-out pairwise accuracy "
        f"{before:.3f} -> {after:.3f} ({len(held)} triplets); saved {args.out}"
    )


if __name__ == "__main__":
    main()

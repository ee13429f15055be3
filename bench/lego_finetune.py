"""Train the local models of LEGO-GraphRAG's fine-tuned and cross-encoder scorers on WebQSP's
gold triples, each from a packaged model, nothing downloaded:

* `--kind bi-encoder` (instances 05, 12 and 18 read models/lego/bi-encoder-ft): all-MiniLM-L6-v2 with the
  paper's margin loss, for a question q, a gold triple p and another triple n of its graph,
      loss = max(0, margin - cos(q, p) + cos(q, n));
* `--kind cross-encoder` (for instances 04, 11 and 17 in place of bge-reranker, which is not on this
  machine; models/lego/cross-encoder-ft): MiniLM's encoder with a fresh one-logit head on
  "question [SEP] triple", the same loss on the logits with margin 1;
* `--kind llm` (instances 07, 14 and 20 read models/lego/llm-ft): SmolLM2-135M-Instruct, supervised on
  the LLM scorer's own prompt (numbered candidates, reply with the useful numbers) with the
  gold triples' numbers as the answer, loss on the answer tokens only; the paper fine-tunes
  its LLM the same way (SFT on retrieval prompts).

    .venv/bin/python -m bench.lego_finetune [--kind bi-encoder|cross-encoder|llm] [--out DIR]
                                            [--skip 600] [--epochs 1] [--held 200]

It trains on WebQSP dev questions after the first `--skip` (bench/lego.py evaluates on the
first 200, so the two never overlap) and prints a held-out score before and after on the first
`--held` questions: pairwise accuracy (gold triple above a non-gold one) for the encoders;
for the LLM, the share of groups it answers parsably and the share whose first pick is gold.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import numpy as np
import torch

from bench.common import DATA, REPO, write_result
from graphrag_engine.eval.datasets import load_questions
from graphrag_engine.methods.lego.modules import pretty_relation
from graphrag_engine.models.embed import packaged_minilm_path

WEBQSP = DATA / "webqsp_dev.jsonl"
OUT = {
    "bi-encoder": "models/lego/bi-encoder-ft",
    "cross-encoder": "models/lego/cross-encoder-ft",
    "llm": "models/lego/llm-ft",
}


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


def groups(questions, rng: random.Random, size: int = 16) -> list[tuple[str, list[str], list[int]]]:
    """(question, numbered candidates, 1-based numbers of the gold ones): one shuffled group of
    up to `size` triples of the question's graph per question, gold triples included."""
    out = []
    for q in questions:
        gold = {tuple(t) for t in q.gold_triples}
        pool = [tuple(t) for t in q.triples or []]
        g = [t for t in pool if t in gold][: max(1, size // 4)]
        others = [t for t in pool if t not in gold]
        if not g or not others:
            continue
        cands = g + rng.sample(others, min(len(others), size - len(g)))
        rng.shuffle(cands)
        out.append(
            (
                q.question,
                [triple_text(list(t)) for t in cands],
                [i + 1 for i, t in enumerate(cands) if t in gold],
            )
        )
    return out


def pair_accuracy(score, triplets) -> float:
    """Share of triplets whose gold triple scores above the other one; `score(qs, texts)`."""
    qs = [t[0] for t in triplets]
    pos, neg = score(qs, [t[1] for t in triplets]), score(qs, [t[2] for t in triplets])
    return float(np.mean(pos > neg))


def train_bi_encoder(args, train, held) -> tuple[float, float, int]:
    """Margin loss on cosine similarities; returns accuracy before, after, steps."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(packaged_minilm_path(), device="cpu", local_files_only=True)

    def score(qs, texts):
        a = model.encode(qs, normalize_embeddings=True)
        return (a * model.encode(texts, normalize_embeddings=True)).sum(1)

    before = pair_accuracy(score, held)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    prep = getattr(model, "preprocess", None) or model.tokenize
    steps = 0
    for batch in _batches(train, args):
        emb = [
            torch.nn.functional.normalize(
                model(dict(prep([b[i] for b in batch])))["sentence_embedding"], dim=-1
            )
            for i in range(3)
        ]
        pos, neg = (emb[0] * emb[1]).sum(-1), (emb[0] * emb[2]).sum(-1)
        _step(opt, torch.relu(args.margin - pos + neg).mean())
        steps += 1
    model.eval()
    after = pair_accuracy(score, held)
    model.save(args.out)
    return before, after, steps


def train_cross_encoder(args, train, held) -> tuple[float, float, int]:
    """Margin loss on the logits of a MiniLM cross-encoder; accuracy before, after, steps."""
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(packaged_minilm_path(), num_labels=1, device="cpu", local_files_only=True)

    def score(qs, texts):
        return ce.predict(list(zip(qs, texts, strict=True)), show_progress_bar=False).ravel()

    before = pair_accuracy(score, held)
    model, tok = ce.model, ce.tokenizer
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    steps = 0
    for batch in _batches(train, args):
        logits = []
        for i in (1, 2):
            enc = tok(
                [b[0] for b in batch],
                [b[i] for b in batch],
                padding=True,
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            logits.append(model(**enc).logits.squeeze(-1))
        _step(opt, torch.relu(1.0 - logits[0] + logits[1]).mean())  # margin 1 on logits
        steps += 1
    model.eval()
    after = pair_accuracy(score, held)
    ce.save(args.out)
    return before, after, steps


def llm_groups_score(model_dir: str | None, held_groups) -> tuple[float, float]:
    """(parsable share, first-pick-is-gold share) of the LLM scorer on the held-out groups,
    greedy, no re-asks."""
    from graphrag_engine.models.llm import LLM
    from graphrag_engine.models.transformers_llm import TransformersLLM
    from graphrag_engine.retrieve.scoring import LLMScorer

    llm = LLM(TransformersLLM(model_dir, batch_size=8) if model_dir else TransformersLLM())
    scorer = LLMScorer(llm, group=16, retries=0)
    scores = scorer.score_batch([(q, c) for q, c, _ in held_groups])
    n = len(held_groups)
    hits = sum(
        1
        for s, (_, _, gold) in zip(scores, held_groups, strict=True)
        if s.max() > 0 and int(np.argmax(s)) + 1 in gold
    )
    return 1 - scorer.failures / n, hits / n


def train_llm(args, train_groups, held_groups) -> tuple[tuple, tuple, int]:
    """SFT of SmolLM2 on the scorer prompt; (parsable, first-pick) before and after, steps."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from graphrag_engine.models.transformers_llm import save_dequantized, smollm2_gguf
    from graphrag_engine.retrieve.scoring import choice_prompt

    before = llm_groups_score(None, held_groups)
    folder, gguf = smollm2_gguf()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=gguf, local_files_only=True, dtype=torch.float32
    )
    rows = []
    for q, cands, gold in train_groups:
        msgs = choice_prompt(q, cands)
        prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        answer = ", ".join(str(g) for g in gold)
        full = tok.apply_chat_template(
            [*msgs, {"role": "assistant", "content": answer}], tokenize=False
        )
        assert full.startswith(prompt), "the chat template must extend the prompt"
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        f_ids = tok(full, add_special_tokens=False)["input_ids"]
        rows.append((f_ids, len(p_ids)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model.train()
    steps, started = 0, time.perf_counter()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    for batch in _batches(rows, args):
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), pad)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (f_ids, n_prompt) in enumerate(batch):
            ids[r, : len(f_ids)] = torch.tensor(f_ids)
            labels[r, n_prompt : len(f_ids)] = torch.tensor(f_ids[n_prompt:])
            mask[r, : len(f_ids)] = 1
        _step(opt, model(input_ids=ids, attention_mask=mask, labels=labels).loss)
        steps += 1
        if steps % 10 == 0:
            print(f"  step {steps}, {time.perf_counter() - started:.0f} s", flush=True)
    model.eval()
    save_dequantized(model, tok, args.out)
    after = llm_groups_score(args.out, held_groups)
    return before, after, steps


def _batches(items: list, args):
    """Shuffled minibatches for `args.epochs` epochs."""
    rng = random.Random(0)
    for _ in range(args.epochs):
        items = items[:]
        rng.shuffle(items)
        for start in range(0, len(items), args.batch):
            yield items[start : start + args.batch]


def _step(opt, loss) -> None:
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    """Train the chosen model, report held-out scores before and after, save it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=sorted(OUT), default="bi-encoder")
    ap.add_argument("--out", default=None, help="default: models/lego/<kind>-ft")
    ap.add_argument("--skip", type=int, default=600)
    ap.add_argument("--held", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--margin", type=float, default=0.3)
    ap.add_argument("--batch", type=int, default=None, help="default: 32 (encoders), 8 (llm)")
    ap.add_argument("--lr", type=float, default=None, help="default: 2e-5 (encoders), 5e-5 (llm)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    llm = args.kind == "llm"
    args.out = args.out or str(REPO / OUT[args.kind])
    args.batch = args.batch or (8 if llm else 32)
    args.lr = args.lr or (5e-5 if llm else 2e-5)
    torch.manual_seed(0)
    questions = load_questions(WEBQSP)
    started = time.perf_counter()
    if llm:
        train = groups(questions[args.skip :], random.Random(0))
        held = groups(questions[: args.held], random.Random(1))
        before, after, steps = train_llm(args, train, held)
        print(
            f"{len(train)} training groups, {steps} steps, {time.perf_counter() - started:.0f} s;"
            f" held-out ({len(held)} groups) parsable {before[0]:.3f} -> {after[0]:.3f},"
            f" first pick gold {before[1]:.3f} -> {after[1]:.3f}; saved {args.out}"
        )
        figures = {"groups": len(train), "steps": steps, "held_out": len(held)}
        figures |= {"parsable": [before[0], after[0]], "first_pick_gold": [before[1], after[1]]}
        write_result("lego_finetune", figures, tag=args.kind)
        return
    train = examples(questions[args.skip :], random.Random(0))
    held = examples(questions[: args.held], random.Random(1), per_question=1)
    fit = train_bi_encoder if args.kind == "bi-encoder" else train_cross_encoder
    before, after, steps = fit(args, train, held)
    print(
        f"{len(train)} training triplets, {steps} steps, {time.perf_counter() - started:.0f} s;"
        f" held-out pairwise accuracy {before:.3f} -> {after:.3f} ({len(held)} triplets);"
        f" saved {args.out}"
    )
    figures = {"triplets": len(train), "steps": steps, "held_out": len(held)}
    write_result("lego_finetune", figures | {"pairwise_accuracy": [before, after]}, tag=args.kind)


if __name__ == "__main__":
    main()

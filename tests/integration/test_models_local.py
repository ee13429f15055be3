"""Model layer with real local models: SmolLM2 (transformers, GGUF) and all-MiniLM-L6-v2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.config import EmbedderConfig
from graphrag_engine.models import LLM, GenParams, LLMRequiredError, NoLLM, ResponseCache
from graphrag_engine.models.embed import packaged_minilm_path
from graphrag_engine.models.rerank import BiEncoderReranker, CrossEncoderReranker
from graphrag_engine.models.structured import ParseError, generate_structured, parse_json
from tests.bars import watch_bar_positions

PROMPTS = [
    "What is the capital of France? Answer in one word.",
    "Name a colour.",
    "Write the number after 3 as a digit.",
    "Say hello.",
    "List two fruits.",
]


class CallCounter:
    """Counts backend calls (instrumentation of the real backend, not a fake)."""

    def __init__(self, backend) -> None:
        self.backend, self.calls, self.prompts = backend, 0, 0
        self.model_id = backend.model_id

    def generate(self, prompts, params):
        self.calls += 1
        self.prompts += len(prompts)
        return self.backend.generate(prompts, params)

    def count_tokens(self, prompts):
        return self.backend.count_tokens(prompts)


@pytest.mark.slow
def test_batched_generation_equals_one_at_a_time(smollm) -> None:
    params = GenParams(max_tokens=12)
    batched = smollm.generate(PROMPTS, params)
    single = [smollm.generate([p], params)[0] for p in PROMPTS]
    assert [c.text for c in batched] == [c.text for c in single]
    counts = smollm.count_tokens(PROMPTS)
    for c, n in zip(batched, counts, strict=True):
        assert c.prompt_tokens == n > 5
        assert 0 < c.completion_tokens <= 12 and c.latency_s > 0 and not c.cached
    assert any(c.finish_reason == "length" for c in batched)


def test_bfloat16_weights_answer_under_their_own_model_id(smollm) -> None:
    """models.llm.dtype: bfloat16 weights answer under a model id of their own, so their
    answers never share cache entries with float32's; auto means bfloat16 only on a CPU with
    bf16 matrix units, float32 on CUDA. Batched bfloat16 answers are not compared word for word
    with answers alone: padding changes bfloat16 sums, and which words that moves depends on
    the CPU (on an AMD EPYC the third prompt's answer parts after five words; docs/models.md).
    A fact the model knows comes out either way."""
    import torch

    from graphrag_engine.models.transformers_llm import TransformersLLM, weights_dtype

    half = TransformersLLM(batch_size=4, dtype="bfloat16")
    assert half.model.dtype == torch.bfloat16 and smollm.model.dtype == torch.float32
    assert half.model_id != smollm.model_id and "+bfloat16" in half.model_id
    params = GenParams(max_tokens=8)
    batched = half.generate(PROMPTS[:3], params)
    assert all(0 < c.completion_tokens <= 8 for c in batched)
    alone = [half.generate([p], params)[0] for p in PROMPTS[:3]]
    assert all(0 < c.completion_tokens <= 8 for c in alone)
    assert "Paris" in batched[0].text and "Paris" in alone[0].text
    native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
    assert weights_dtype("auto", "cpu") == ("bfloat16" if native else "float32")
    assert weights_dtype("auto", "cuda") == "float32" == weights_dtype("float32", "cpu")
    assert weights_dtype("fast", "cpu") == ("bfloat16" if native else "int8")
    assert weights_dtype("fast", "cuda") == "float32"


def test_int8_weights_answer_and_keep_their_own_cache(smollm) -> None:
    """dtype int8 (what the demo's `fast` takes on a CPU without bf16 units): the linear layers
    but the head and the MLP's down projection hold int8 weights, the backend id ends in +int8
    (its answers are its own), and on a CPU the demo gives int8 to it answers what float32
    answers where the model knows the fact; the same again when asked again."""
    import torch

    from graphrag_engine.errors import ConfigError
    from graphrag_engine.models.hf_weights import weights_dtype
    from graphrag_engine.models.transformers_llm import TransformersLLM, int8_weights

    small = TransformersLLM(batch_size=4, dtype="int8")
    kept = {n for n, m in small.model.named_modules() if isinstance(m, torch.nn.Linear)}
    quantized = [
        m
        for m in small.model.modules()
        if type(m).__name__ == "Linear" and "quantized" in type(m).__module__
    ]
    assert len(quantized) == 30 * 6, "attention's four projections, the MLP's gate and up"
    assert kept == {"lm_head"} | {f"model.layers.{i}.mlp.down_proj" for i in range(30)}
    assert small.model_id == smollm.model_id.replace("+llguidance", "+int8+llguidance")
    params = GenParams(max_tokens=8)
    batched = small.generate(PROMPTS[:3], params)
    if weights_dtype("fast", "cpu") == "int8":  # a CPU the demo gives int8 weights to
        assert "Paris" in batched[0].text
    else:  # bf16 units run other int8 kernels (VNNI, AMX): a 135M model's greedy words can flip
        assert batched[0].text.strip()
    assert [c.text for c in small.generate(PROMPTS[:3], params)] == [c.text for c in batched]
    with pytest.raises(ConfigError, match="int8 runs on the CPU"):
        int8_weights(smollm.model, "cuda")


@pytest.mark.slow
def test_cache_makes_a_rerun_free_and_keeps_tokens(smollm, tmp_path: Path) -> None:
    counter = CallCounter(smollm)
    llm = LLM(counter, cache=ResponseCache(tmp_path / "cache.sqlite"))
    params = GenParams(max_tokens=8)
    first = llm.generate(PROMPTS + PROMPTS[:2], params, stage="answer")  # duplicates sent once
    assert counter.calls == 1 and counter.prompts == len(PROMPTS)
    again = LLM(counter, cache=ResponseCache(tmp_path / "cache.sqlite"))  # a fresh run
    second = again.generate(PROMPTS, params, stage="answer")
    assert counter.calls == 1, "a finished stage makes zero model calls"
    assert [c.text for c in second] == [c.text for c in first[: len(PROMPTS)]]
    assert all(c.cached for c in second)
    u1, u2 = llm.ledger.get("answer", smollm.model_id), again.ledger.get("answer", smollm.model_id)
    assert u1.calls == 5 and u1.cached_calls == 2
    assert u2.calls == 0 and u2.cached_calls == 5
    assert u2.cached_prompt_tokens == sum(c.prompt_tokens for c in first[:5])
    assert u2.cached_completion_tokens == sum(c.completion_tokens for c in first[:5])


@pytest.mark.slow
def test_dry_run_counts_without_calling(smollm) -> None:
    counter = CallCounter(smollm)
    llm = LLM(counter, dry_run=True)
    out = llm.generate(PROMPTS, GenParams(max_tokens=50), stage="extract")
    assert counter.calls == 0 and all(c.dry_run and c.text == "" for c in out)
    usage = llm.ledger.get("extract", smollm.model_id)
    assert usage.dry_run_prompts == 5 and usage.prompt_tokens == sum(smollm.count_tokens(PROMPTS))
    est = llm.estimate(PROMPTS, GenParams(max_tokens=50))
    assert est == {"prompts": 5, "prompt_tokens": usage.prompt_tokens, "max_completion_tokens": 250}


def test_a_dry_run_loads_the_tokenizer_only() -> None:
    """Counting prompt tokens (every --dry-run) never loads the model's weights."""
    from graphrag_engine.models.transformers_llm import TransformersLLM

    fresh = TransformersLLM(batch_size=2)
    llm = LLM(fresh, dry_run=True)
    llm.generate(PROMPTS, GenParams(max_tokens=50), stage="extract")
    assert fresh._model is None
    assert llm.ledger.get("extract", fresh.model_id).prompt_tokens > 5 * 5


@pytest.mark.slow
def test_structured_retries_then_records_failures(smollm) -> None:
    llm = LLM(smollm, max_failed_share=1.0)  # this stage accepts nothing: record, go on

    def never(text: str):
        raise ParseError("this stage accepts nothing")

    run = generate_structured(
        llm, PROMPTS[:3], never, GenParams(max_tokens=6), stage="s", retries=2
    )
    assert run.failures == 3
    assert all(r.attempts == 3 and r.raw and r.value is None and r.error for r in run.results)
    usage = llm.ledger.get("s", smollm.model_id)
    assert usage.parse_failures == 3 and usage.retries == 6 and usage.calls == 9


@pytest.mark.slow
def test_structured_json_with_the_local_model(smollm) -> None:
    llm = LLM(smollm)
    prompts = [
        f'Return only a JSON object like {{"city": "...", "country": "..."}} for the city {c}.'
        for c in ("Paris", "Rome", "Tokyo", "Berlin")
    ]
    run = generate_structured(
        llm, prompts, parse_json, GenParams(max_tokens=40), stage="json", retries=2
    )
    assert len(run.results) == 4
    for r in run.results:
        assert r.ok == (r.error is None)
        if r.ok:
            assert isinstance(r.value, dict | list)
        else:
            assert r.raw, "a failure keeps the raw text"
    assert llm.ledger.get("json", smollm.model_id).parse_failures == run.failures


def test_none_backend_names_the_stage() -> None:
    with pytest.raises(LLMRequiredError, match="stage 'community_reports' needs an LLM"):
        LLM(NoLLM()).generate(["x"], GenParams(), stage="community_reports")


def test_embedder_is_normalized_batched_and_meaningful(minilm) -> None:
    texts = [
        "Hana Lirrow designed the opera house.",
        "The opera house was designed by Hana Lirrow.",
        "Smoked eel is sold on Thursdays.",
    ]
    vecs = minilm.encode(texts)
    assert vecs.dtype == np.float32 and vecs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.3
    one = np.stack([minilm.encode([t])[0] for t in texts])
    np.testing.assert_allclose(vecs, one, atol=1e-5)
    assert minilm.encode([]).shape == (0, 384)


def test_ner_workers_tag_as_this_process_does(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large local NER job spread over worker processes returns the mentions tagging here
    returns, block by block, each position once; the workers start only for texts the NER
    cache lacks, so re-tagging cached texts starts none."""
    from graphrag_engine.exec import local as local_exec
    from graphrag_engine.exec.local import LocalExecutor
    from graphrag_engine.models.ner_cache import BLOCK, NERCache

    texts = [
        s
        for line, _ in zip((shared_data / "musique_corpus.jsonl").open(), range(800), strict=False)
        for s in json.loads(line)["text"].split(". ")
    ][: 2 * BLOCK + 100]
    assert len(texts) == 2 * BLOCK + 100
    monkeypatch.setattr(local_exec, "NER_WORKERS_FROM", 2 * BLOCK)
    local = LocalExecutor(EmbedderConfig(), "spacy")
    here = dict(
        (i, m)
        for pos, found in local.ner_blocks(texts[: 2 * BLOCK - 1])
        for i, m in zip(pos, found, strict=True)
    )
    assert local.ner_workers == 0  # below the threshold: tagged in this process
    cache = NERCache(tmp_path / "ner.sqlite")
    try:
        spread = cache.extract(local, local.ner_model_id, texts)
        assert local.ner_workers >= 2 and local._ner_pool is not None
    finally:
        local.close()
    assert local._ner_pool is None
    assert spread == local.ner(texts) and [spread[i] for i in here] == list(here.values())
    assert sum(map(len, spread)) > 1000
    again = LocalExecutor(EmbedderConfig(), "spacy")
    try:
        assert NERCache(tmp_path / "ner.sqlite").extract(again, local.ner_model_id, texts) == spread
        assert again.ner_workers == 0  # every text was cached
    finally:
        again.close()


def test_bi_encoder_reranker(minilm) -> None:
    rr = BiEncoderReranker(minilm)
    pairs = [
        (
            "Who designed the Quillon Opera House?",
            ["Smoked eel is sold on Thursdays.", "Hana Lirrow designed the Quillon Opera House."],
        ),
        (
            "What is sold in Hollowmere?",
            [
                "Hana Lirrow designed the Quillon Opera House.",
                "Smoked eel is sold on Thursdays in Hollowmere.",
            ],
        ),
        ("empty", []),
    ]
    scores = rr.score_batch(pairs)
    assert np.argmax(scores[0]) == 1 and np.argmax(scores[1]) == 1 and scores[2].size == 0
    np.testing.assert_allclose(rr.score(*pairs[0]), scores[0], atol=1e-6)


def test_cross_encoder_from_local_folder() -> None:
    # the packaged MiniLM weights with a fresh one-logit head: a real CrossEncoder code path
    rr = CrossEncoderReranker(packaged_minilm_path())
    pairs = [("q one", ["a", "b", "c"]), ("q two", ["d"])]
    batch = rr.score_batch(pairs)
    assert [s.shape for s in batch] == [(3,), (1,)]
    np.testing.assert_allclose(rr.score("q two", ["d"]), batch[1], atol=1e-5)
    assert not np.allclose(batch[0][0], batch[0][1])


def test_ner_alone_finds_what_the_tagger_pipeline_finds(shared_data: Path) -> None:
    """spaCy's NER without tok2vec/tagger/attribute_ruler (its own embedding) gives the same
    entities, at the same offsets, as the pipeline with them, on 300 MuSiQue passages."""
    import spacy

    from graphrag_engine.models.ner import SPACY_MODEL, entity_recognizer

    texts = [
        json.loads(line)["text"]
        for line, _ in zip((shared_data / "musique_corpus.jsonl").open(), range(300), strict=False)
    ]
    tagger = spacy.load(SPACY_MODEL, exclude=["parser", "lemmatizer", "senter"])
    assert "tagger" in tagger.pipe_names
    ner = entity_recognizer("spacy")
    assert ner._nlp.pipe_names == ["ner"]
    full = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in tagger.pipe(texts)]
    lean = [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in ner._nlp.pipe(texts)]
    assert sum(map(len, full)) > 1000 and lean == full


class Watched:
    """Instrumentation of a real backend: after each report of finished answers, how many of
    the batch's answers the front has cached (not a fake: the real backend answers)."""

    def __init__(self, backend, cache: ResponseCache) -> None:
        self.backend, self.cache, self.reports = backend, cache, []
        self.model_id = backend.model_id
        self.cache_id = getattr(backend, "cache_id", backend.model_id)

    def generate(self, prompts, params, on_done=None):
        from graphrag_engine.models.base import prompt_key

        keys = [prompt_key(self.cache_id, p, params) for p in prompts]

        def seen(indices, answers):
            on_done(indices, answers)
            self.reports.append((len(indices), len(self.cache.get_many(keys))))

        return self.backend.generate(prompts, params, on_done=seen)

    def count_tokens(self, prompts):
        return self.backend.count_tokens(prompts)


def test_answers_are_cached_as_each_forward_batch_finishes(smollm, tmp_path: Path) -> None:
    """The whole stage goes to the backend in one call; each forward batch of 4 is cached
    (and counted on the progress bar) before the next one starts."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    watched = Watched(smollm, cache)
    llm = LLM(watched, cache=cache, flush_every=1)  # flush_every only slices non-reporters
    prompts = [f"Name a number bigger than {i}." for i in range(6)]
    out = llm.generate(prompts, GenParams(max_tokens=4), stage="numbers")
    assert len(out) == 6 and watched.reports == [(4, 4), (2, 6)]


def test_embedding_cache_streams_what_it_stored_in_order(
    minilm, tmp_path: Path, monkeypatch
) -> None:
    """`embed` stores the missing vectors of texts given a window at a time, without returning
    them, in one model call unless the missing text passes PENDING_CHARS; `stored` / `stream`
    then give every text's vector in order, window by window, equal to `encode` and to the
    model's own."""
    from graphrag_engine.models import text_cache
    from graphrag_engine.models.embed_cache import EmbeddingCache
    from graphrag_engine.models.text_cache import windows

    class Counting:  # the real embedder, its calls recorded
        def __init__(self) -> None:
            self.model_id, self.calls = minilm.model_id, []

        def encode(self, texts: list[str]) -> np.ndarray:
            self.calls.append(list(texts))
            return minilm.encode(texts)

    texts = ["a harbour town", "the opera house", "a harbour town", "smoked eel", "x"] * 3
    cache, model = EmbeddingCache(tmp_path / "embed.sqlite"), Counting()
    assert cache.embed(model, [texts[:2]]) == 2
    assert (cache.hits, cache.misses) == (0, 2)
    assert cache.embed(model, windows(texts, 4), total=len(texts)) == 15
    assert (cache.hits, cache.misses) == (9, 2 + 2)  # 9 texts cached, 2 distinct new ones
    assert model.calls[1:] == [["smoked eel", "x"]], "one call for every window's missing text"

    monkeypatch.setattr(text_cache, "PENDING_CHARS", 1)  # flush each window's missing text
    small, model = EmbeddingCache(tmp_path / "small.sqlite"), Counting()
    small.embed(model, windows(texts, 4))
    assert model.calls == [["a harbour town", "the opera house", "smoked eel"], ["x"]]
    assert (small.hits, small.misses) == (10, 4)

    class Blocks:
        def __init__(self) -> None:
            self.blocks: list[np.ndarray] = []

        def append(self, block: np.ndarray) -> None:
            self.blocks.append(block)

    sink = Blocks()
    for part in cache.stored(minilm.model_id, windows(texts, 4)):
        sink.append(np.stack(part))
    assert [len(b) for b in sink.blocks] == [4, 4, 4, 3]
    streamed = np.concatenate(sink.blocks)
    np.testing.assert_allclose(streamed, minilm.encode(texts), atol=1e-5)
    assert np.array_equal(streamed, cache.encode(minilm, texts))
    # other batches than the first cache's: equal up to the model's batch-dependent rounding
    by_window = np.concatenate([np.stack(p) for p in small.stored(model.model_id, [texts])])
    np.testing.assert_allclose(by_window, streamed, atol=1e-5)
    other = Blocks()
    cache.stream(minilm.model_id, windows(texts), other)
    assert len(other.blocks) == -(-len(texts) // text_cache.WINDOW)
    assert np.array_equal(np.concatenate(other.blocks), streamed)
    with pytest.raises(RuntimeError, match="were not in the cache"):
        list(cache.stored("another-model", [texts]))


def test_nan_scores_stop_generation_with_a_clear_error(smollm) -> None:
    """Fault injection on the real model: one NaN weight in the final norm makes every score
    NaN; the backend refuses (naming model and device) instead of decoding noise."""
    import torch

    from graphrag_engine.errors import ConfigError

    smollm.generate(PROMPTS[:1], GenParams(max_tokens=1))  # weights load as generation loads them
    norm = smollm.model.model.norm.weight
    with torch.inference_mode():  # weights first used inside inference mode are inference tensors
        saved = norm.clone()
        norm[0] = float("nan")
    try:
        with pytest.raises(ConfigError, match=r"NaN scores on cpu for 2 of 2 prompts"):
            smollm.generate(PROMPTS[:2], GenParams(max_tokens=4))
    finally:
        with torch.inference_mode():
            norm.copy_(saved)
    assert smollm.generate(PROMPTS[:1], GenParams(max_tokens=4))[0].completion_tokens > 0


def test_a_tokenizer_that_lost_its_merges_is_refused(smollm, tmp_path: Path) -> None:
    """Fault injection on the real SmolLM2 tokenizer: without its BPE merges (what transformers
    5.17 makes of Gemma 3's GGUF tokenizer) it splits prose character by character, and the
    backend refuses it at load instead of feeding the model text it never saw."""
    from graphrag_engine.errors import ConfigError
    from graphrag_engine.models.transformers_llm import TransformersLLM, check_tokenizer

    assert 3.5 < check_tokenizer(smollm.tokenizer, "smollm2") < 7
    smollm.tokenizer.save_pretrained(tmp_path)
    spec = json.loads((tmp_path / "tokenizer.json").read_text())
    assert spec["model"]["merges"]
    spec["model"]["merges"] = []
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ConfigError, match=r"into 1\.\d\d characters a token .* lost its merges"):
        TransformersLLM(str(tmp_path))


def test_decoding_steps_move_the_stage_bar_within_a_forward_pass(smollm, monkeypatch) -> None:
    """A forward pass's prompts finish together; with `on_step` each decoding step reports the
    pass's share done, so the stage bar moves (and has a rate) before the pass ends."""
    seen: list[float] = []
    out = smollm.generate(
        [f"Count to {i}." for i in range(3)], GenParams(max_tokens=6), on_step=seen.append
    )
    assert len(out) == 3 and 1 <= len(seen) <= 6
    assert seen == sorted(seen) and 0 < seen[0] and seen[-1] < 3  # below the pass's 3 prompts
    from graphrag_engine.models import llm as llm_module

    positions = watch_bar_positions(llm_module, monkeypatch)
    LLM(smollm).generate(["Say yes.", "Say no."], GenParams(max_tokens=5), stage="steps")
    assert positions[-1] == 2 and any(0 < p < 2 for p in positions)

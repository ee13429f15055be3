"""The Python front door: open an index once, run one or several methods over a list of
questions (sharing the loaded index, embedder and LLM), read the results as Arrow (or pandas, when installed).

    from graphrag_engine import Engine

    engine = Engine("runs/demo-index")
    runs = engine.run_many(["bm25", "naive"], "demo", out="runs/demo-query")
    print(runs["bm25"].summary["questions_per_s"])
    table = runs["naive"].table()           # Arrow: a row per question (ids, answer, gold)

`graphrag-engine query` is a thin shell over `Engine.run_many`: every run folder it writes is
resumable, and the same folder can be read back with `Run.open(folder)`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import re
import tempfile
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_engine.config.query import QueryConfig
from graphrag_engine.demo import questions_path
from graphrag_engine.errors import BadInputError
from graphrag_engine.eval.datasets import Question
from graphrag_engine.eval.question_file import QuestionFile
from graphrag_engine.eval.report import evaluate_runs, write_staged
from graphrag_engine.methods import load_query_config, method_names, method_spec, query_config
from graphrag_engine.methods.needs import check_needs
from graphrag_engine.models import make_backend
from graphrag_engine.query.answer_together import TogetherCall, answer_together, prepare
from graphrag_engine.query.run import run_query
from graphrag_engine.results import read_rows
from graphrag_engine.store import open_index
from graphrag_engine.store.index_store import Index, NoIndex
from graphrag_engine.store.run_folder import write_atomic

log = logging.getLogger(__name__)

LLM_FLAGS = "--llm-backend transformers (the packaged SmolLM2), or --llm-backend openai --base-url URL --llm-model NAME"


@dataclass
class Run:
    """A finished query run: its label, folder and summary; the results on demand."""

    label: str
    folder: Path
    summary: dict[str, Any]

    @classmethod
    def open(cls, folder: str | Path) -> Run:
        """A run folder written earlier (by `query` or `Engine.run`)."""
        folder = Path(folder)
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        return cls(summary.get("label") or folder.name, folder, summary)

    def table(self) -> pa.Table:
        """One row per question: ranked ids and scores, context, answer, gold, tokens, seconds."""
        return pq.read_table(self.folder / "results.parquet")

    def to_pandas(self):
        """The results as a pandas DataFrame (needs pandas installed)."""
        return self.table().to_pandas(maps_as_pydicts="strict")

    def rows(self) -> list[dict[str, Any]]:
        """The results as plain dicts (tokens, seconds and extras as dicts)."""
        return read_rows(self.folder / "results.parquet")


@dataclass(frozen=True)
class RayPlacement:
    """Where a sharded query run goes: the cluster (`local` starts one, `auto` joins the
    running one, or ray://host:port), its actors, and GPUs per actor (None: what the models
    need), and whether the questions are embedded by a Ray Data pipeline first (None: for
    runs of graphrag_engine.query.ray_run.PIPELINE_MIN_QUESTIONS questions or more)."""

    address: str = "local"
    workers: int = 2
    gpus_per_worker: float | None = None
    question_pipeline: bool | None = None


def _label(method: str | QueryConfig) -> str:
    """The run-folder name of a method: the registered name, or the YAML file's stem."""
    if isinstance(method, QueryConfig):
        return method.method
    return Path(method).stem if method.endswith((".yaml", ".yml")) else method


SAFE_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._+ -]{0,62}[A-Za-z0-9._+-])?")


def _check_label(label: str | None) -> str | None:
    """A run label as given, refused unless it is a safe file name (it names the run's folder
    under --out and a report row): letters, digits, '.', '_', '+', '-' and inner spaces, at
    most 64 characters, starting with a letter or digit (so never '..')."""
    if label is None:
        return None
    if not SAFE_LABEL.fullmatch(label):
        shown = label if len(label) <= 40 else label[:40] + "..."
        raise BadInputError(
            f"--label {shown!r}: give 1-64 letters, digits, '.', '_', '+', '-' or inner "
            "spaces, starting with a letter or digit"
        )
    return label


def _labelled(folder: Path, summary: dict[str, Any], label: str) -> dict[str, Any]:
    """The run's summary with its label, written back to summary.json (reports read it)."""
    summary = {"label": label, **summary}
    write_atomic(folder / "summary.json", json.dumps(summary, indent=2).encode())
    return summary


class Engine:
    """One index (or "none" for questions that carry their own graphs) and the models its
    runs share: methods run one after another in this process, loading each model once."""

    def __init__(self, index: str | Path | Index = "none") -> None:
        """Open the index in `index` (checked against its manifest) or use "none"."""
        if isinstance(index, Index | NoIndex):
            self.index = index
        else:
            self.index = NoIndex() if str(index) == "none" else open_index(index)
        self._backends: dict[str, Any] = {}
        self._noted: set[str] = set()  # methods told they run retrieval only
        self.answer_calls: list[TogetherCall] = []
        """The batched answer calls of the last `run_many(..., answers_together=True)`."""

    def config(
        self,
        method: str | QueryConfig,
        retrieval_only: bool = False,
        llm_backend: str | None = None,
        llm_model: str | None = None,
        base_url: str | None = None,
        batch_size: int | None = None,
    ) -> QueryConfig:
        """The validated config of `method` (a registered name, a YAML path or a QueryConfig)
        with the command-line overrides applied. A bare method name that needs no LLM of its
        own runs retrieval only when no LLM backend is set, instead of failing."""
        bare = isinstance(method, str) and not Path(method).is_file()
        cfg = _resolve(method) if isinstance(method, str) else copy.deepcopy(method)
        if retrieval_only:
            cfg.generation.enabled = False
        if llm_backend:
            cfg.models.llm.backend = llm_backend
        if llm_model:
            cfg.models.llm.model = llm_model
        if base_url:
            cfg.models.llm.base_url = base_url
        if batch_size is not None:
            cfg.batch_size = batch_size
        own_llm = cfg.method_llm_use()
        if cfg.models.llm.backend == "none":
            if own_llm:
                raise BadInputError(
                    f"{cfg.method}: {own_llm} needs an LLM and none is set; pass {LLM_FLAGS}"
                )
            if bare and cfg.generation.enabled:
                cfg.generation.enabled = False
                if cfg.method not in self._noted:
                    self._noted.add(cfg.method)
                    log.info(
                        f"{cfg.method}: no LLM backend set, so passages are ranked and no answer "
                        f"is generated (for answers pass {LLM_FLAGS})"
                    )
        cfg.validate(cfg.method)
        cfg.validate_llm(cfg.method)
        return cfg

    def questions(self, questions: str | Path | Sequence[Question], limit: int | None = None):
        """(source name, questions): a question JSONL path, "demo", or Question objects."""
        if limit is not None and limit < 1:
            raise BadInputError(
                f"--limit {limit}: give 1 or more questions (leave --limit out for all of them)"
            )
        if isinstance(questions, str | Path):
            source = str(questions_path()) if str(questions) == "demo" else str(questions)
            return source, QuestionFile(source, limit=limit)
        return "<list>", list(questions)[:limit]

    def run(
        self,
        method: str | QueryConfig,
        questions: str | Path | Sequence[Question],
        out: str | Path | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        fail_fast: bool = False,
        ray: RayPlacement | None = None,
        label: str | None = None,
        **overrides: Any,
    ) -> Run:
        """Run one method into the run folder `out` (a temporary folder when None); a folder
        holding an earlier, unfinished run of the same inputs resumes it. `overrides` are
        those of `config` (retrieval_only, llm_backend, llm_model, base_url, batch_size).
        With `ray`, the question batches are sharded over that many Ray actors. `label` names
        the run in reports (default: the method's name or its YAML file's stem)."""
        source, qs = self.questions(questions, limit)
        folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="graphrag-run-"))
        cfg = self.config(method, **overrides)
        label = _check_label(label) or _label(method)
        self.check_needs([(label, cfg)], qs)
        return self._run(label, cfg, source, qs, folder, dry_run, fail_fast, ray)

    def run_many(
        self,
        methods: Sequence[str | QueryConfig],
        questions: str | Path | Sequence[Question],
        out: str | Path | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        fail_fast: bool = False,
        ray: RayPlacement | None = None,
        labels: Sequence[str] | None = None,
        answers_together: bool = False,
        **overrides: Any,
    ) -> dict[str, Run]:
        """Run several methods over the same questions, one run folder each under `out`
        (named after its label: the method or its YAML file, or the matching entry of
        `labels`), every config checked before the first run starts. With `answers_together`
        (local runs), every method retrieves first and all their answer prompts go to the
        model in one batched call per model (`methods/answer_together.py`; the calls are kept
        in `answer_calls`)."""
        if labels is not None and len(labels) != len(methods):
            raise BadInputError(
                f"--label: give one per --method ({len(methods)}), got {len(labels)}"
            )
        labels = [_check_label(lb) for lb in labels] if labels else [_label(m) for m in methods]
        twice = sorted({lb for lb in labels if labels.count(lb) > 1})
        if twice:
            raise BadInputError(
                f"--method: {', '.join(twice)} given twice; each run folder is named after its "
                "label, so give each method once or a --label of its own"
            )
        configs = [self.config(m, **overrides) for m in methods]
        source, qs = self.questions(questions, limit)
        self.check_needs(list(zip(labels, configs, strict=True)), qs)
        root = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="graphrag-runs-"))
        self.answer_calls = []
        if answers_together and ray is None and not dry_run:
            pending = [
                ask
                for label, cfg in zip(labels, configs, strict=True)
                for ask in prepare(
                    self.index, qs, cfg, root / label, source, self._shared_backend(cfg)
                )
            ]
            self.answer_calls = answer_together(pending)
        with _one_cluster(ray, dry_run):
            return {
                label: self._run(label, cfg, source, qs, root / label, dry_run, fail_fast, ray)
                for label, cfg in zip(labels, configs, strict=True)
            }

    def compare(
        self,
        methods: Sequence[str | QueryConfig],
        questions: str | Path | Sequence[Question],
        out: str | Path,
        ks: Sequence[int] = (1, 2, 5, 10),
        limit: int | None = None,
        labels: Sequence[str] | None = None,
        fail_fast: bool = False,
        ray: RayPlacement | None = None,
        answers_together: bool = False,
        **overrides: Any,
    ) -> tuple[dict[str, Run], Path]:
        """Run every method over the same questions (`out`/runs/<label>, every method's needs
        checked against the index and the questions before the first runs) and evaluate them
        into one report (`out`/report); returns the runs and the path of report.md."""
        root = Path(out)
        runs = self.run_many(
            methods, questions, root / "runs", limit=limit, fail_fast=fail_fast, ray=ray,
            labels=labels, answers_together=answers_together, **overrides,
        )  # fmt: skip
        folders = [str(r.folder) for r in runs.values()]
        (root / "report").mkdir(parents=True, exist_ok=True)
        report = write_staged(
            root / "report", lambda staging: evaluate_runs(folders, staging, list(ks))
        )
        return runs, report

    def ask(
        self,
        question: str,
        methods: Sequence[str | QueryConfig],
        out: str | Path | None = None,
        **overrides: Any,
    ) -> dict[str, Run]:
        """Answer one question with each method: a batch of one through the same code path as
        `run_many` (run folders under `out`, a temporary folder when None)."""
        text = question.strip()
        if not text:
            raise BadInputError("ask: the question is empty; give the question as one argument")
        asked = [Question(qid="ask-1", question=text, kind="plain")]
        root = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="graphrag-ask-"))
        return self.run_many(list(methods), asked, root, **overrides)

    def check_needs(
        self, runs: Sequence[tuple[str, QueryConfig]], questions: Sequence[Question]
    ) -> None:
        """Every method's index parts and question fields, checked before the first one runs
        (exit 2 naming the method, the part and what provides it)."""
        check_needs(
            [(label, method_spec(cfg.method), cfg.options) for label, cfg in runs],
            self.index,
            questions,
        )

    def _run(
        self, label: str, cfg: QueryConfig, source: str, questions: Sequence[Question], folder: Path,
        dry_run: bool, fail_fast: bool, ray: RayPlacement | None = None,
    ) -> Run:  # fmt: skip
        if ray is not None and not dry_run:  # a dry run sends nothing: no actors needed
            from graphrag_engine.query.ray_run import run_query_on_ray  # ray is an optional extra

            summary = run_query_on_ray(
                self.index, questions, cfg, folder, source, ray.address, ray.workers,
                ray.gpus_per_worker, fail_fast, question_pipeline=ray.question_pipeline,
            )  # fmt: skip
            return Run(label, folder, _labelled(folder, summary, label))
        backend = None if dry_run else self._shared_backend(cfg)
        summary = run_query(
            self.index, questions, cfg, folder, source, dry_run=dry_run, llm_backend=backend,
            fail_fast=fail_fast,
        )  # fmt: skip
        return Run(label, folder, summary if dry_run else _labelled(folder, summary, label))

    def _shared_backend(self, cfg: QueryConfig):
        """The LLM backend of a config, made once per distinct model setting for this Engine
        (None when the run asks no LLM, or for backend "none": the run's own front handles it)."""
        llm = cfg.models.llm
        own_llm = cfg.method_llm_use()
        if llm.backend == "none" or not (cfg.generation.enabled or own_llm):
            return None
        key = json.dumps(
            {k: v for k, v in dataclasses.asdict(llm).items() if k not in ("cache", "flush_every")},
            sort_keys=True,
            default=str,
        )
        if key not in self._backends:
            self._backends[key] = make_backend(llm)
        return self._backends[key]


def _one_cluster(ray: RayPlacement | None, dry_run: bool) -> AbstractContextManager:
    """One Ray session for every method of a sharded multi-method run (each run joins it
    instead of starting and stopping a cluster of its own); nothing without Ray placement."""
    if ray is None or dry_run:
        return nullcontext()
    from graphrag_engine.exec.ray_executor import ray_session  # ray is an optional extra

    return ray_session(ray.address, ray.workers)


def _resolve(method: str) -> QueryConfig:
    """--method is a YAML file, or the bare name of a registered method with its defaults."""
    if method.endswith((".yaml", ".yml")) or Path(method).is_file():
        return load_query_config(method)
    if method not in method_names():
        raise BadInputError(
            f"--method {method!r}: not a config file and not a registered method "
            f"({', '.join(method_names())}; `graphrag-engine methods` describes them)"
        )
    return query_config(method)

"""Ray executor: texts sharded over model-holding actors (one embedder + NER per worker) on a
local or running Ray cluster; results come back in input order and merge into one index."""

from __future__ import annotations

import numpy as np

from engine.config import EmbedderConfig
from engine.errors import ConfigError


def _worker_class():
    import ray

    @ray.remote(num_cpus=1)
    class ModelWorker:
        """Holds the models once; answers shards of texts."""

        def __init__(self, embedder: dict, ner_backend: str) -> None:
            import os

            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("GRAPHRAG_PROGRESS", "0")
            from engine.exec.local import LocalExecutor  # in the actor process

            self.local = LocalExecutor(EmbedderConfig(**embedder), ner_backend)

        def model_ids(self) -> tuple[str, str]:
            return self.local.model_id, self.local.ner_model_id

        def encode(self, texts: list[str]) -> np.ndarray:
            return self.local.encode(texts)

        def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
            return self.local.ner(texts)

        def _llm(self, llm_cfg: dict):
            if getattr(self, "llm_backend", None) is None:
                from engine.config import LLMConfig  # in the actor process
                from engine.models import make_backend  # in the actor process

                self.llm_backend = make_backend(LLMConfig(**llm_cfg))
            return self.llm_backend

        def llm_model_id(self, llm_cfg: dict) -> str:
            return self._llm(llm_cfg).model_id

        def generate(self, llm_cfg: dict, prompts: list, params):
            return self._llm(llm_cfg).generate(prompts, params)

        def count_tokens(self, llm_cfg: dict, prompts: list) -> list[int]:
            return self._llm(llm_cfg).count_tokens(prompts)

    return ModelWorker


class RayLLMBackend:
    """An LLM backend whose engines live in the executor's actors (one per worker): a batch is
    split into one shard per actor and answered in parallel, in input order."""

    def __init__(self, executor: RayExecutor, llm_cfg: dict) -> None:
        self.executor = executor
        self.cfg = llm_cfg
        self.model_id = executor._ray.get(executor.actors[0].llm_model_id.remote(llm_cfg))

    def generate(self, prompts: list, params, on_done=None) -> list:
        """One shard per actor, answered in parallel; each shard goes to `on_done` as it
        returns, and the answers come back in input order."""
        ex = self.executor
        futures, start = {}, 0
        for actor, shard in zip(ex.actors, ex._shards(prompts), strict=True):
            if shard:
                futures[actor.generate.remote(self.cfg, shard, params)] = start
            start += len(shard)
        out: list = [None] * len(prompts)
        pending = list(futures)
        while pending:
            ready, pending = ex._ray.wait(pending, num_returns=1)
            lo = futures[ready[0]]
            answers = ex._ray.get(ready[0])
            out[lo : lo + len(answers)] = answers
            if on_done is not None:
                on_done(list(range(lo, lo + len(answers))), answers)
        return out

    def count_tokens(self, prompts: list) -> list[int]:
        """Prompt tokens, counted by the first actor's tokenizer."""
        return self.executor._ray.get(
            self.executor.actors[0].count_tokens.remote(self.cfg, prompts)
        )


class RayExecutor:
    """Shards every call over `workers` actors; `address` 'local' starts a private cluster."""

    name = "ray"

    def __init__(
        self, embedder: EmbedderConfig, ner_backend: str, address: str = "local", workers: int = 2
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError(
                "executor 'ray' needs Ray: pip install 'graphrag-engine[ray]'"
            ) from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            if address == "local":
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
            self._started = True
        from dataclasses import asdict

        worker = _worker_class()
        self.actors = [worker.remote(asdict(embedder), ner_backend) for _ in range(workers)]
        self.model_id, self.ner_model_id = ray.get(self.actors[0].model_ids.remote())

    def _shards(self, items: list) -> list[list]:
        n = len(self.actors)
        size = -(-len(items) // n) if items else 0
        return [items[i * size : (i + 1) * size] for i in range(n)]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts, computed by the actors in parallel."""
        parts = [(a, s) for a, s in zip(self.actors, self._shards(texts), strict=True) if s]
        results = self._ray.get([a.encode.remote(s) for a, s in parts])
        return np.concatenate(results) if results else np.zeros((0, 0), np.float32)

    def ner(self, texts: list[str]) -> list[list[tuple[str, str]]]:
        """Entities of every text, computed by the actors in parallel."""
        parts = [(a, s) for a, s in zip(self.actors, self._shards(texts), strict=True) if s]
        out: list = []
        for r in self._ray.get([a.ner.remote(s) for a, s in parts]):
            out.extend([tuple(m) for m in ents] for ents in r)
        return out

    def llm_backend(self, llm_cfg) -> RayLLMBackend | None:
        """In-process LLM backends (transformers, vllm) move into the actors; servers stay remote."""
        from dataclasses import asdict

        if llm_cfg.backend not in ("transformers", "vllm"):
            return None
        return RayLLMBackend(self, asdict(llm_cfg))

    def close(self) -> None:
        """Release the actors (and the cluster this executor started)."""
        for a in self.actors:
            self._ray.kill(a)
        if self._started:
            self._ray.shutdown()

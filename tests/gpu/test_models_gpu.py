"""GPU model paths (vLLM offline batch, guided JSON, CUDA transformers); skipped without a GPU.

Set GRAPHRAG_VLLM_MODEL to a local model folder (e.g. Qwen2.5-0.5B-Instruct) to run the vLLM tests.
"""

from __future__ import annotations

import json
import os

import pytest

from graphrag_engine.models import GenParams
from tests.cuda import needs_cuda

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def vllm_backend():
    pytest.importorskip("vllm")
    model = os.environ.get("GRAPHRAG_VLLM_MODEL")
    if not model:
        pytest.skip("set GRAPHRAG_VLLM_MODEL to a local model folder")
    from graphrag_engine.models.vllm_llm import VLLMBackend

    return VLLMBackend(model, gpu_memory_utilization=0.5)


@needs_cuda
def test_vllm_offline_batch(vllm_backend) -> None:
    out = vllm_backend.generate(
        ["Say hello.", "Name a colour.", "What is 2+2?"], GenParams(max_tokens=16)
    )
    assert len(out) == 3 and all(c.text and c.completion_tokens <= 16 for c in out)


@needs_cuda
def test_vllm_reports_answers_as_requests_finish(vllm_backend) -> None:
    """Short answers reach on_done before the long ones finish; every index exactly once."""
    prompts = ["Say yes."] * 4 + ["Write a long story about a lighthouse."] * 4
    params = GenParams(max_tokens=256)
    reports: list[list[int]] = []
    out = vllm_backend.generate(prompts, params, on_done=lambda idx, _: reports.append(idx))
    assert sorted(i for r in reports for i in r) == list(range(8))
    assert len(reports) > 1, "answers came back in more than one step"
    assert [c.text for c in out] == [c.text for c in vllm_backend.generate(prompts, params)]


@needs_cuda
def test_vllm_guided_json(vllm_backend) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    out = vllm_backend.generate(
        ["Give the capital of France as JSON."], GenParams(max_tokens=64, json_schema=schema)
    )
    assert isinstance(json.loads(out[0].text)["city"], str)


@needs_cuda
def test_transformers_on_cuda_matches_cpu(smollm) -> None:
    from graphrag_engine.models.transformers_llm import TransformersLLM

    gpu = TransformersLLM(device="cuda", batch_size=4)
    prompts = ["Say hello.", "Name a colour."]
    assert [c.text for c in gpu.generate(prompts, GenParams(max_tokens=8))] == [
        c.text for c in smollm.generate(prompts, GenParams(max_tokens=8))
    ]

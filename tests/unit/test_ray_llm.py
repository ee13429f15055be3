"""vLLM through `ray.data.llm` (graphrag_engine/exec/ray_llm.py): what a stage sends (sampling
parameters with its schema, rows with positions) and how answered rows become Completions are
checked here; the processor itself needs vLLM and a GPU (marked gpu, with
GRAPHRAG_VLLM_MODEL naming a local model folder)."""

from __future__ import annotations

import json
import os

import pytest

from graphrag_engine.exec.ray_llm import completion_of, prompt_rows, sampling_params
from graphrag_engine.models import GenParams
from tests.cuda import needs_cuda

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_sampling_params_carry_the_schema_only_when_constrained() -> None:
    params = GenParams(max_tokens=32, temperature=0.5, seed=7, stop=("\n",), json_schema=SCHEMA)
    sent = sampling_params(params)
    assert sent == {
        "max_tokens": 32,
        "temperature": 0.5,
        "top_p": 1.0,
        "seed": 7,
        "stop": ["\n"],
        "structured_outputs": {"json": SCHEMA},
    }
    assert "structured_outputs" not in sampling_params(params, constrained=False)
    assert "stop" not in sampling_params(GenParams())


def test_rows_keep_positions_and_answers_map_back() -> None:
    rows = prompt_rows(["first", [{"role": "user", "content": "second"}]])
    assert [r["pos"] for r in rows] == [0, 1]
    assert rows[1]["messages"] == [{"role": "user", "content": "second"}]
    assert rows[0]["messages"][-1] == {"role": "user", "content": "first"}

    pos, ok = completion_of(
        {"pos": 1, "generated_text": '{"city": "Paris"}', "num_input_tokens": 12,
         "num_generated_tokens": 6, "__inference_error__": ""},
        schema_given=True,
    )  # fmt: skip
    assert (pos, ok.text, ok.prompt_tokens, ok.completion_tokens) == (1, '{"city": "Paris"}', 12, 6)
    assert ok.error is None and ok.decoding == "schema"

    pos, failed = completion_of(
        {"pos": 0, "generated_text": "", "num_input_tokens": 0, "__inference_error__": "OOM"},
        schema_given=True,
    )
    assert pos == 0 and failed.error == "OOM" and failed.text == "" and failed.decoding is None


@pytest.mark.gpu
@pytest.mark.ray
@needs_cuda
def test_ray_data_vllm_answers_in_input_order() -> None:
    pytest.importorskip("vllm")
    ray = pytest.importorskip("ray")
    model = os.environ.get("GRAPHRAG_VLLM_MODEL")
    if not model:
        pytest.skip("set GRAPHRAG_VLLM_MODEL to a local model folder")
    from graphrag_engine.exec.ray_llm import RayDataVLLM

    llm_cfg = {"model": model, "tensor_parallel_size": 1, "gpu_memory_utilization": 0.5,
               "batch_size": 4, "constrained": True}  # fmt: skip
    ray.init(include_dashboard=False, log_to_driver=False)
    try:
        backend = RayDataVLLM(llm_cfg, workers=1)
        prompts = [f"Give the capital of {c} as JSON." for c in ("France", "Italy", "Spain")]
        seen: list[int] = []
        out = backend.generate(
            prompts, GenParams(max_tokens=32, json_schema=SCHEMA), lambda i, _: seen.extend(i)
        )
        assert sorted(seen) == [0, 1, 2]
        assert [json.loads(c.text)["city"] for c in out][0].lower().startswith("paris")
        assert all(c.decoding == "schema" and c.error is None for c in out)
        assert backend.count_tokens(prompts) == [c.prompt_tokens for c in out]
    finally:
        ray.shutdown()

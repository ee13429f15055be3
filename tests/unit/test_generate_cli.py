"""`graphrag-engine generate` without a server: prompt files checked, the none backend refused.
The tests that talk to a real llama.cpp server are in tests/integration/test_models_server.py."""

from __future__ import annotations

from pathlib import Path


def test_generate_cli_bad_prompt_file(tmp_path: Path, run_cli) -> None:
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": 1, "prompt": "ok"}\n{"id": 2}\n')
    proc = run_cli("generate", str(bad), "--backend", "none", "--out", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 2
    assert f"{bad}:2: needs a non-empty 'prompt'" in proc.stderr
    bad.write_bytes(b'\xef\xbb\xbf{"id": 1, "prompt": "ok"}\n{"id": 2, "prompt": "a\\ud800"}\n')
    proc = run_cli("generate", str(bad), "--backend", "none", "--out", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 2 and f"{bad}:2: holds a lone surrogate" in proc.stderr  # BOM ok


def test_generate_cli_none_backend_names_stage(tmp_path: Path, run_cli) -> None:
    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "hi"}\n')
    proc = run_cli(
        "generate",
        str(p),
        "--backend",
        "none",
        "--out",
        str(tmp_path / "a.jsonl"),
        "--stage",
        "extract",
    )
    assert proc.returncode == 2 and "stage 'extract' needs an LLM" in proc.stderr

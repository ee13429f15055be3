"""Response cache: persistence, token counts, several real processes writing at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from graphrag_engine.models import Completion, GenParams, ResponseCache
from graphrag_engine.models.base import prompt_key

WRITER = textwrap.dedent(
    """
    import sys
    from graphrag_engine.models import Completion, ResponseCache
    path, worker = sys.argv[1], int(sys.argv[2])
    cache = ResponseCache(path)
    for round_ in range(20):
        items = [(f"k{(worker * 37 + round_ * 11 + i) % 300}", Completion(f"v{(worker * 37 + round_ * 11 + i) % 300}", 5, 2))
                 for i in range(15)]
        cache.put_many("m", items)
        got = cache.get_many([k for k, _ in items])
        assert all(got[k].text == "v" + k[1:] for k, _ in items), "read back what was written"
    print("ok")
    """
)


def test_roundtrip_keeps_token_counts(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put_many("m", [("a", Completion("hello", 11, 4, finish_reason="length"))])
    again = ResponseCache(tmp_path / "c.sqlite")  # a new process would see the same
    hit = again.get_many(["a", "b"])
    assert set(hit) == {"a"}
    c = hit["a"]
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.cached, c.finish_reason) == (
        "hello",
        11,
        4,
        True,
        "length",
    )
    cache.put_many("m", [("a", Completion("other", 1, 1))])
    assert again.get_many(["a"])["a"].text == "hello", "first answer wins"
    assert len(again) == 1
    mode = again._conn().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_key_depends_on_model_prompt_and_params() -> None:
    p = GenParams(max_tokens=10)
    base = prompt_key("m", "hi", p)
    assert base == prompt_key("m", [{"role": "user", "content": "hi"}], p)
    assert base != prompt_key("m2", "hi", p)
    assert base != prompt_key("m", "hi!", p)
    assert base != prompt_key("m", "hi", GenParams(max_tokens=11))
    assert base != prompt_key("m", "hi", p.with_seed(1))


def test_concurrent_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ResponseCache(path)
    script = tmp_path / "w.py"
    script.write_text(WRITER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    cache = ResponseCache(path)
    written = {(w * 37 + r * 11 + i) % 300 for w in range(4) for r in range(20) for i in range(15)}
    assert len(cache) == len(written)
    got = cache.get_many([f"k{i}" for i in written])
    assert all(got[f"k{i}"].text == f"v{i}" for i in written)

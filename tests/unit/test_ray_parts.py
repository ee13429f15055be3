"""Ray pool actors write each block's results as a Parquet part that the driver reads, hands on
and deletes (graphrag_engine/exec/ray_data.py): the columns survive the round trip exactly, a part the
driver cannot see is one clear error, and a pipeline through parts gives what one through Ray's
object store gives, leaving no part behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphrag_engine.errors import ConfigError
from graphrag_engine.exec.ray_data import read_part, writing_parts


class Doubles:
    """A stand-in pool actor (no model): vectors, strings and positions of a block."""

    def __init__(self, width: int) -> None:
        self.width = width

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        n = len(batch["pos"])
        vectors = np.arange(n * self.width, dtype=np.float32).reshape(n, self.width) / 7
        texts = np.array([t * 2 for t in batch["text"]], dtype=object)
        return {"pos": batch["pos"], "out": vectors, "twice": texts}


def test_a_part_holds_exactly_what_the_actor_returned(tmp_path: Path) -> None:
    batch = {"pos": np.arange(5, 9), "text": np.array(["a", "bé", "", "d\nx"], dtype=object)}
    writer = writing_parts(Doubles)(3, str(tmp_path))
    assert type(writer).__name__ == "DoublesToParts"
    (path,) = writer(batch)["part"]
    assert Path(path).parent == tmp_path and not list(tmp_path.glob(".*.tmp"))
    back = read_part(path)
    expected = Doubles(3)(batch)
    assert back["pos"].tolist() == [5, 6, 7, 8]
    assert back["out"].dtype == np.float32 and back["out"].shape == (4, 3)
    np.testing.assert_array_equal(back["out"], expected["out"])
    assert back["twice"].tolist() == ["aa", "bébé", "", "d\nxd\nx"]


def test_a_part_the_driver_cannot_see_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("graphrag_engine.exec.ray_data.PART_VISIBLE_S", 0.3)
    with pytest.raises(ConfigError, match="storage every node shares"):
        read_part(str(tmp_path / "elsewhere.parquet"))


def test_processor_rows_through_a_part_become_the_same_completions(tmp_path: Path) -> None:
    """Ray's vLLM processor rows (an answered one, a failed one that keeps its prompt columns)
    written as a part keep only the answer columns and map to the same Completions."""
    import pyarrow as pa

    from graphrag_engine.exec.ray_data import parts_read, rows_to_part
    from graphrag_engine.exec.ray_llm import ANSWER_COLUMNS, ERROR_COLUMN, completion_of, rows_of

    rows = pa.table(
        {
            "pos": [1, 0],
            "generated_text": ['{"city": "Paris"}', None],
            "num_input_tokens": [12, None],
            "num_generated_tokens": [6, None],
            ERROR_COLUMN: [None, "CUDA out of memory"],
            "messages": [[{"role": "user", "content": "a"}]] * 2,
        }
    )
    announced = rows_to_part(rows, str(tmp_path), (*ANSWER_COLUMNS, ERROR_COLUMN))
    (block,) = parts_read([{"part": np.array(announced["part"].to_pylist(), dtype=object)}])
    assert set(block) == {*ANSWER_COLUMNS, ERROR_COLUMN}
    through = [completion_of(r, schema_given=True) for r in rows_of(block)]
    direct = [completion_of(r, schema_given=True) for r in rows.to_pylist()]
    assert through == direct
    assert through[0][1].text == '{"city": "Paris"}' and through[0][1].decoding == "schema"
    assert through[1][1].error == "CUDA out of memory" and through[1][1].text == ""


def _slow_bounds(lengths: list[int], most: int, first: int, chars: int) -> list[tuple[int, int]]:
    """The same cut, written out text by text as a reference."""
    out, block, size, held = [], [], min(first, most), 0
    for i, n in enumerate(lengths):
        if block and (len(block) == size or held + n > chars):
            out.append((block[0], block[-1] + 1))
            block, size, held = [], min(2 * size, most), 0
        block.append(i)
        held += n
    return out + ([(block[0], block[-1] + 1)] if block else [])


def test_blocks_grow_from_a_small_first_one_and_keep_to_a_character_budget() -> None:
    """A pipeline's first block is small so its first results come back early, blocks double
    up to the most texts, and long texts cut a block early (a text longer than the budget goes
    alone); every text is in exactly one block, in order."""
    from graphrag_engine.exec.ray_data import block_bounds

    assert block_bounds([10] * 100, 32, first=4, chars=10_000) == [
        (0, 4), (4, 12), (12, 28), (28, 60), (60, 92), (92, 100)
    ]  # fmt: skip
    assert block_bounds([10, 500, 10, 10], 8, first=8, chars=100) == [(0, 1), (1, 2), (2, 4)]
    assert block_bounds([], 8) == []
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = rng.integers(1, 400, rng.integers(0, 300)).tolist()
        most, first, chars = int(rng.integers(1, 64)), int(rng.integers(1, 20)), 1000
        got = block_bounds(lengths, most, first, chars)
        assert got == _slow_bounds(lengths, most, first, chars)
        assert [i for lo, hi in got for i in range(lo, hi)] == list(range(len(lengths)))

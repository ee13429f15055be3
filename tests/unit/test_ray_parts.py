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

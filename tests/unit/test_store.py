"""Index store: schemas, manifest, validation, atomic commit under a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine.errors import IndexFormatError
from graphrag_engine.store import SCHEMA_VERSION, TABLES, IndexWriter, open_index
from graphrag_engine.store.schemas import schema_for


def doc_rows(n: int, marker: str) -> list[dict]:
    return [
        {
            "doc_id": f"{marker}-{i}",
            "external_id": None,
            "title": marker,
            "text": f"text {i}",
            "source": "t:1",
            "meta": None,
        }
        for i in range(n)
    ]


def commit_simple(root: Path, marker: str, n: int = 10) -> dict:
    w = IndexWriter(root)
    w.write_table("documents", doc_rows(n, marker))
    w.write_vectors("chunk_vectors", np.full((n, 4), 0.5, dtype=np.float32), model="test-model")
    return w.commit(config={"k": 1}, config_hash="abc", models={"embedder": "test-model"})


COMMIT_LOOP = textwrap.dedent(
    """
    import sys, numpy as np
    from graphrag_engine.store import IndexWriter
    root, start = sys.argv[1], int(sys.argv[2])
    n = 40000
    for g in range(start, start + 10000):
        marker = f"gen{g}"
        w = IndexWriter(root)
        rows = [{"doc_id": f"{marker}-{i}", "external_id": None, "title": marker,
                 "text": "x" * 50, "source": "s", "meta": None} for i in range(n)]
        w.write_table("documents", rows)
        w.write_vectors("chunk_vectors", np.full((n, 32), g, dtype=np.float32), model="m")
        w.commit(config={"g": g}, config_hash=marker, models={})
        print(g, flush=True)
    """
)


def test_every_design_table_has_a_schema() -> None:
    for name in (
        "documents",
        "chunks",
        "units",
        "entities",
        "relations",
        "unit_entity",
        "communities",
        "reports",
    ):
        assert isinstance(TABLES[name], pa.Schema)
    assert schema_for("graph_entity").names == ["src", "dst", "weight"]
    assert TABLES["chunks"].field("n_tokens").type == pa.int32()


def test_roundtrip_and_manifest(tmp_path: Path) -> None:
    m = commit_simple(tmp_path, "a", n=7)
    assert m["schema_version"] == SCHEMA_VERSION and m["generation"] == 1
    assert m["files"]["documents"]["rows"] == 7
    assert (
        m["files"]["chunk_vectors"]["shape"] == [7, 4]
        and m["files"]["chunk_vectors"]["model"] == "test-model"
    )
    assert m["models"] == {"embedder": "test-model"} and m["config_hash"] == "abc"
    idx = open_index(tmp_path)
    assert idx.table("documents").num_rows == 7
    assert idx.table("documents").schema.remove_metadata().equals(TABLES["documents"])
    vec = idx.vectors("chunk_vectors")
    assert vec.dtype == np.float32 and vec.shape == (7, 4)
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk == m


def test_second_commit_replaces_and_old_generation_is_collected(tmp_path: Path) -> None:
    for g in range(4):
        commit_simple(tmp_path, f"g{g}")
    idx = open_index(tmp_path)
    assert idx.generation == 4
    assert set(idx.table("documents")["title"].to_pylist()) == {"g3"}
    assert sorted(p.name for p in tmp_path.glob("gen-*")) == ["gen-000003", "gen-000004"]


def test_carry_over_links_unchanged_table(tmp_path: Path) -> None:
    commit_simple(tmp_path, "a")
    base = open_index(tmp_path)
    w = IndexWriter(tmp_path, base=base)
    w.carry_over("documents")
    w.write_table("chunks", [])
    w.commit(config={}, config_hash="x", models={})
    idx = open_index(tmp_path)
    assert idx.table("documents")["title"].to_pylist() == ["a"] * 10
    assert idx.rows("chunks") == 0 and idx.table("chunks").schema.remove_metadata().equals(
        TABLES["chunks"]
    )


def test_abort_and_exception_leave_previous_index(tmp_path: Path) -> None:
    commit_simple(tmp_path, "old")
    with pytest.raises(RuntimeError):
        with IndexWriter(tmp_path) as w:
            w.write_table("documents", doc_rows(3, "new"))
            raise RuntimeError("boom")
    assert open_index(tmp_path).table("documents")["title"].to_pylist() == ["old"] * 10
    assert not list(tmp_path.glob(".staging-*"))


def test_second_writer_is_refused(tmp_path: Path) -> None:
    w = IndexWriter(tmp_path)
    with pytest.raises(IndexFormatError, match="another process is writing"):
        IndexWriter(tmp_path)
    w.abort()


def test_newer_schema_version_refused_naming_both(tmp_path: Path) -> None:
    commit_simple(tmp_path, "a")
    path = tmp_path / "manifest.json"
    m = json.loads(path.read_text())
    m["schema_version"] = SCHEMA_VERSION + 5
    path.write_text(json.dumps(m))
    with pytest.raises(IndexFormatError) as err:
        open_index(tmp_path)
    assert f"schema version {SCHEMA_VERSION + 5}" in str(err.value)
    assert f"up to version {SCHEMA_VERSION}" in str(err.value)


def test_damaged_index_detected(tmp_path: Path) -> None:
    m = commit_simple(tmp_path, "a")
    doc_path = tmp_path / m["files"]["documents"]["path"]
    # a table with the wrong schema under the right name
    pq.write_table(pa.table({"doc_id": ["x"]}), doc_path)
    with pytest.raises(IndexFormatError, match="differs from the manifest|expected schema"):
        open_index(tmp_path)
    doc_path.unlink()
    with pytest.raises(IndexFormatError, match="missing"):
        open_index(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(IndexFormatError, match="not valid JSON"):
        open_index(tmp_path)
    with pytest.raises(IndexFormatError, match="no index here"):
        open_index(tmp_path / "elsewhere")


def test_wrong_schema_with_matching_size_detected(tmp_path: Path) -> None:
    m = commit_simple(tmp_path, "a")
    doc_path = tmp_path / m["files"]["documents"]["path"]
    pq.write_table(pa.table({"other": list(range(50))}), doc_path)
    m["files"]["documents"]["bytes"] = doc_path.stat().st_size
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="expected schema"):
        open_index(tmp_path)


@pytest.mark.slow
def test_killed_writer_leaves_a_consistent_index(tmp_path: Path) -> None:
    """SIGKILL a real process at many points of its commit loop; the index stays whole."""
    script = tmp_path / "loop.py"
    script.write_text(COMMIT_LOOP)
    root = tmp_path / "idx"
    rng = np.random.default_rng(0)
    start = 0
    seen_generations = set()
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(root), str(start)], stdout=subprocess.PIPE, text=True
        )
        proc.stdout.readline()  # at least one commit done
        time.sleep(float(rng.uniform(0.05, 0.8)))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        idx = open_index(root)
        marker = idx.manifest["config_hash"]
        titles = idx.table("documents", columns=["title"])["title"]
        assert len(titles) == idx.rows("documents") == 40000
        assert set(titles.to_pylist()) == {marker}
        g = int(marker.removeprefix("gen"))
        vec = idx.vectors("chunk_vectors")
        assert vec.shape == (40000, 32) and float(vec.min()) == float(vec.max()) == g
        seen_generations.add(idx.generation)
        start = g + 1000
    assert len(seen_generations) == 6


def test_an_unreadable_target_is_refused_before_any_work_unless_forced(tmp_path: Path) -> None:
    """A damaged or newer-schema manifest in the target stops the writer as it opens (no
    staging folder, nothing written), says how to recover, and --force rebuilds in place."""
    commit_simple(tmp_path, "old")
    path = tmp_path / "manifest.json"
    good = path.read_text()
    newer = json.loads(good) | {"schema_version": SCHEMA_VERSION + 1}
    for text, what in (("{damaged", "--force"), (json.dumps(newer), "upgrade graphrag-engine")):
        path.write_text(text)
        with pytest.raises(IndexFormatError, match=what):
            IndexWriter(tmp_path)
        assert not list(tmp_path.glob(".staging-*")) and path.read_text() == text
    w = IndexWriter(tmp_path, force=True)
    w.write_table("documents", doc_rows(2, "new"))
    m = w.commit(config={"k": 1}, config_hash="abc", models={})
    assert m["generation"] == 2 and open_index(tmp_path).rows("documents") == 2


def test_a_failed_commit_removes_its_staging(tmp_path: Path) -> None:
    commit_simple(tmp_path, "old")
    w = IndexWriter(tmp_path)
    w.write_table("documents", doc_rows(3, "new"))
    (tmp_path / "manifest.json").write_text("{damaged meanwhile")
    with pytest.raises(IndexFormatError):
        w.commit(config={"k": 1}, config_hash="abc", models={})
    assert not list(tmp_path.glob(".staging-*"))
    IndexWriter(tmp_path, force=True).abort()  # the lock was released


def test_non_finite_vectors_and_paths_outside_the_index_are_refused(tmp_path: Path) -> None:
    commit_simple(tmp_path, "a")
    index = open_index(tmp_path)
    path = tmp_path / index.manifest["files"]["chunk_vectors"]["path"]
    arr = np.load(path)
    arr[3, 1] = np.nan
    np.save(path, arr)  # same size and shape
    with pytest.raises(IndexFormatError, match="NaN or infinite"):
        open_index(tmp_path).vectors("chunk_vectors")
    with pytest.raises(ValueError, match="NaN or infinite"):
        IndexWriter(tmp_path / "other").write_vectors("v", arr, model="m")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["files"]["documents"]["path"] = "../outside/documents.parquet"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="outside the index folder"):
        open_index(tmp_path)


def test_vectors_streamed_in_blocks_equal_one_save_and_blocks_are_checked(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    arr = rng.standard_normal((1000, 24)).astype(np.float32)
    w = IndexWriter(tmp_path / "idx")
    w.write_table("documents", doc_rows(2, "s"))
    with w.vector_sink("chunk_vectors", len(arr), model="m") as sink:
        for lo in range(0, len(arr), 300):  # 300, 300, 300, 100 rows
            sink.append(arr[lo : lo + 300])
    assert np.array_equal(w.staged_vectors("chunk_vectors"), arr)
    w.write_vectors("unit_vectors", np.zeros((0, 0), np.float32), model="m")
    w.commit(config={}, config_hash="h", models={})
    index = open_index(tmp_path / "idx")
    reference = tmp_path / "reference.npy"
    np.save(reference, arr)
    stored = tmp_path / "idx" / index.manifest["files"]["chunk_vectors"]["path"]
    assert stored.read_bytes() == reference.read_bytes()
    assert index.manifest["files"]["chunk_vectors"]["shape"] == [1000, 24]
    assert index.vectors("unit_vectors").shape == (0, 0)
    bad = IndexWriter(tmp_path / "bad")
    for blocks, message in [
        ([arr[:10], arr[:10, :5]], "width 5 after width 24"),
        ([arr[:10], arr[:5]], "more than the 12 rows"),
        ([arr[:10]], "10 rows written of 12"),
        ([arr[:2, :, None]], "must be 2-D"),
        ([np.full((2, 24), np.inf, np.float32)], "NaN or infinite"),
    ]:
        with pytest.raises(ValueError, match=message):
            with bad.vector_sink("v", 12, model="m") as sink:
                for block in blocks:
                    sink.append(block)
        with pytest.raises(KeyError):
            bad.staged_vectors("v")  # nothing recorded for a failed table
    bad.abort()


DAMAGE = {
    "files is a list": lambda m: m.update(files=list(m["files"])),
    "an entry is a string": lambda m: m["files"].update(documents="documents.parquet"),
    "an entry lacks bytes": lambda m: m["files"]["documents"].pop("bytes"),
    "generation is text": lambda m: m.update(generation="abc"),
    "a value nested deeply": lambda m: m.update(stats=None),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_manifest_shape_is_one_line_exit_2_for_every_reader(
    tmp_path: Path, capsys, case: str
) -> None:
    """info, query and index --out crashed (AttributeError, TypeError, RecursionError) on a
    manifest of the wrong shape; each now says 'damaged manifest' and what to do, exit 2."""
    from graphrag_engine.cli import main

    root = tmp_path / "idx"
    commit_simple(root, "a")
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    DAMAGE[case](manifest)
    text = json.dumps(manifest)
    if case == "a value nested deeply":
        text = text.replace('"stats": null', '"stats": ' + "[" * 100_000 + "]" * 100_000)
    path.write_text(text)
    with pytest.raises(IndexFormatError, match="damaged manifest|not valid JSON"):
        open_index(root)
    for args in (
        ["info", str(root)],
        ["query", str(root), "demo", "--method", "none", "--out", str(tmp_path / "run")],
        ["index", "--demo", "--out", str(root)],
    ):
        assert main(args) == 2, (case, args)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "manifest" in err[0] and "--force" in err[0], (case, args, err)


def test_a_generation_folder_linked_outside_the_index_is_not_read(tmp_path: Path) -> None:
    """A generation folder replaced by a symlink to a folder elsewhere was read; an index now
    reads only files whose resolved path lies inside its folder."""
    root = tmp_path / "idx"
    commit_simple(root, "a")
    gen = next(root.glob("gen-*"))
    elsewhere = tmp_path / "elsewhere"
    gen.rename(elsewhere)
    gen.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(IndexFormatError, match="leads outside the index folder"):
        open_index(root)
    inside = root / "moved-inside"
    elsewhere.rename(inside)
    gen.unlink()
    gen.symlink_to(inside, target_is_directory=True)
    assert open_index(root).generation == 1  # a link that stays inside is fine


def user_entries(root: Path) -> dict[str, str]:
    """Entries of the user's own in a folder about to become an index, named like the
    engine's: each relative path with its content."""
    files = {
        "gen-notes/keep.txt": "notes",
        ".staging-mine/keep.txt": "staged by the user",
        "gen-000001/mine.txt": "looks like a generation",
        "gen-000002/table.parquet.bak": "a backup",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def test_commits_remove_only_what_the_engine_wrote(tmp_path: Path) -> None:
    """A writer's sweeps (stale staging, old generations) and its commit leave every entry of
    the user's in place, even those named like the engine's, through several commits."""
    mine = user_entries(tmp_path)
    killed = tmp_path / ".staging-0123456789ab"  # what a killed build of the engine leaves
    (killed / "documents.parquet").parent.mkdir()
    (killed / "documents.parquet").write_bytes(b"half")
    (killed / ".graphrag-engine-owned").touch()
    for g in range(4):
        commit_simple(tmp_path, f"g{g}")
    for rel, text in mine.items():
        assert (tmp_path / rel).read_text() == text, rel
    assert not killed.exists()
    idx = open_index(tmp_path)
    assert set(idx.table("documents")["title"].to_pylist()) == {"g3"}
    engine_gens = sorted(
        p.name for p in tmp_path.glob("gen-*") if (p / ".graphrag-engine-owned").exists()
    )
    assert engine_gens == [f"gen-{idx.generation - 1:06d}", f"gen-{idx.generation:06d}"]
    assert idx.generation == 6  # generations 1 and 2 were the user's names: 3 to 6 were used

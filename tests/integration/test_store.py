"""Index store: schemas, manifest, validation, atomic commit under a real SIGKILL. (the part that needs models, servers or real data)."""

from __future__ import annotations

from pathlib import Path

from graphrag_engine.store import open_index


def test_checksums_are_recorded_while_writing_and_verified(
    tmp_path: Path, demo_index: Path, capsys
) -> None:
    """Every file's sha256 is in the manifest as written; same-size damage to a Parquet file
    passes the size check but `info --verify` names it, and a query that reads it exits 2
    naming it instead of failing inside pyarrow."""
    import shutil

    from graphrag_engine.cli import main
    from graphrag_engine.store.index_store import file_sha256

    idx = tmp_path / "idx"
    shutil.copytree(demo_index, idx)
    index = open_index(idx)
    for entry in index.manifest["files"].values():
        assert entry["sha256"] == file_sha256(idx / entry["path"])
    assert index.verify() == []
    assert main(["info", str(idx), "--verify"]) == 0
    chunks = idx / index.manifest["files"]["chunks"]["path"]
    data = bytearray(chunks.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 64] = bytes(64)  # same size, damaged inside
    chunks.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["info", str(idx)]) == 0  # sizes still match
    assert main(["info", str(idx), "--verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{chunks}: content differs" in err[0]
    args = ["query", str(idx), "demo", "--method", "bm25", "--retrieval-only"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    assert str(chunks) in capsys.readouterr().err

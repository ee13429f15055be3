"""Compare two capture folders of docs/checks/capture.sh (before and after a change): index
files by sha256, run results row by row and run summaries (timing fields aside), command
output (timings and paths aside), exit codes, the eval report.

    python docs/checks/compare_captures.py BEFORE AFTER
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq

TIMING = re.compile(r"second|_s$|per_s|elapsed|created|date|time", re.I)
NUM = re.compile(
    r"median [0-9.e+-]+, p90 [0-9.e+-]+|\| \d+ \| [0-9.e+-]+ \| [0-9.]+ \||\d+\.\d+ s|\(\d+(\.\d+)? q/s|stage seconds \{.*\}|in \d+\.\d+ s"
)


def main(a: Path, b: Path) -> int:
    """Print what is the same and what differs; exit 1 when something differs."""
    same: list[str] = []
    differ: list[str] = []

    def note(ok: bool, what: str) -> None:
        (same if ok else differ).append(what)

    def clean(obj):
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items() if not TIMING.search(k)}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        if isinstance(obj, str):
            return obj.replace(str(a), "X").replace(str(b), "X")
        return obj

    for idx in ("index", "rindex", "mindex"):
        ma = json.loads((a / idx / "manifest.json").read_text())["files"]
        mb = json.loads((b / idx / "manifest.json").read_text())["files"]
        note(ma.keys() == mb.keys(), f"{idx}: same parts ({len(ma)})")
        for k in sorted(ma.keys() & mb.keys()):
            if k == "documents" and ma[k]["sha256"] != mb[k]["sha256"]:  # `source` names the
                rows = [  # corpus file, whose path differs between two checkouts
                    [
                        {**r, "source": Path(r["source"]).name}
                        for r in pq.read_table(d / idx / m[k]["path"]).to_pylist()
                    ]
                    for d, m in ((a, ma), (b, mb))
                ]
                note(rows[0] == rows[1], f"{idx}/{k}: rows (sources by file name)")
                continue
            note(ma[k]["sha256"] == mb[k]["sha256"], f"{idx}/{k}: sha256")
    for sub in ("runs", "llm", "cfg", "mus"):
        for ra in sorted((a / sub).glob("*")):
            rb, name = b / sub / ra.name, f"{sub}/{ra.name}"
            if (ra / "results.parquet").exists() and (rb / "results.parquet").exists():
                ta = clean(pq.read_table(ra / "results.parquet").to_pylist())
                tb = clean(pq.read_table(rb / "results.parquet").to_pylist())
                note(ta == tb, f"{name}: results.parquet rows ({len(ta)})")
            for f in ("summary.json", "run.json", "llm_usage.json"):
                if (ra / f).exists() and not (rb / f).exists():
                    note(False, f"{name}: {f} only before")
                elif (ra / f).exists():
                    before = clean(json.loads((ra / f).read_text()))
                    after = clean(json.loads((rb / f).read_text()))
                    if f == "run.json":  # the index's id and the question file's path follow
                        for run in (before, after):  # the checkout's path (documents' source)
                            run.get("index", {}).pop("content", None)
                            run.get("questions", {}).pop("source", None)
                    note(before == after, f"{name}: {f}")
    for fa in sorted(a.glob("*.out")) + sorted(a.glob("*.err")):
        ta = NUM.sub("T", fa.read_text().replace(str(a), "X"))
        tb = NUM.sub("T", (b / fa.name).read_text().replace(str(b), "X"))
        note(ta == tb, f"{fa.name}: output text")
    rcs = [sorted((d / "rcs.txt").read_text().splitlines()) for d in (a, b)]
    note(rcs[0] == rcs[1], "exit codes of every command")
    for p in sorted((a / "report").glob("*.csv")):
        rows = [
            [{k: v for k, v in r.items() if k != "seconds" and r.get("metric") != "seconds"}
             for r in csv.DictReader((d / "report" / p.name).open())]
            for d in (a, b)
        ]  # fmt: skip
        note(rows[0] == rows[1], f"report/{p.name} (timings aside)")
    print("\n".join([f"SAME {s}" for s in same] + [f"DIFFER {d}" for d in differ]))
    print(f"same: {len(same)}; differ: {len(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))

"""The command line's parser: every command, its arguments and their help. Kept apart from the
commands (cli/index_commands.py, cli/query_commands.py), which import their modules only when they run, so `--help`
starts without loading torch."""

from __future__ import annotations

import argparse

from graphrag_engine import __version__

TOGETHER_HELP = (
    "with several --method: every method retrieves first, then all their answers go to the "
    "LLM in one batched call"
)


def _at_least(least: int):
    """An argparse type: a whole number of at least `least` (argparse exits 2 otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"give {least} or more, got {value}")
        return value

    return parse


DESCRIPTION = "Command line: demo | index | import | info | query | eval | export | bench (thin: parse, call, print)."


def _calibrate_flag(p: argparse.ArgumentParser) -> None:
    """--calibrate: whether a dry run may time a model that has no measured calls."""
    p.add_argument(
        "--calibrate",
        choices=["auto", "yes", "no"],
        default="auto",
        help="dry runs: time a model with no measured calls by three short calls (auto: only "
        "models in this process; yes: servers too; no: never)",
    )


def _registered_methods() -> list[str]:
    from graphrag_engine.methods import method_names  # the registry, once the parser is built

    return method_names()


def _add_build_args(p: argparse.ArgumentParser) -> None:
    """The config, ingest and executor flags `index` and `reindex` share."""
    p.add_argument("--config", help="YAML config (see configs/index.yaml)")
    p.add_argument(
        "--skip-bad", action="store_true", help="skip and count malformed records and files"
    )
    p.add_argument(
        "--strict-ids",
        action="store_true",
        help="refuse a corpus id given to two different texts (default: count and warn)",
    )
    p.add_argument(
        "--executor", choices=["local", "ray"], help="where the model stages run (default: config)"
    )
    p.add_argument(
        "--address", help="Ray cluster: local (start one), auto (join), or ray://host:port"
    )
    p.add_argument("--id-field", help="JSONL/Parquet field holding the record id")
    p.add_argument("--title-field", help="field holding the title")
    p.add_argument("--text-field", help="field holding the text")


def _method_args(p: argparse.ArgumentParser, how_many: str) -> None:
    """--method (repeatable) and the retrieval-only and LLM flags of ask and compare."""
    p.add_argument(
        "--method",
        required=True,
        action="append",
        help=f"a registered method or a method config YAML; {how_many}",
    )
    p.add_argument("--retrieval-only", action="store_true", help="rank passages, generate nothing")
    p.add_argument("--llm-backend", choices=["none", "transformers", "openai", "vllm"])
    p.add_argument("--llm-model")
    p.add_argument("--base-url", dest="base_url")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `graphrag-engine` console script."""
    parser = argparse.ArgumentParser(prog="graphrag-engine", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"graphrag-engine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "demo",
        help="index the demo corpus and compare every method on its questions, with a report",
    )
    p.add_argument("--out", default="demo", help="folder for the index and run folders")
    p.add_argument(
        "--questions", type=int, default=3, help="demo questions every method answers (of 45)"
    )
    p.add_argument(
        "--no-answers", action="store_true", help="rank passages only, even with SmolLM2 installed"
    )
    p.add_argument(
        "--method",
        action="append",
        dest="methods",
        metavar="NAME",
        help="run only these registered methods (repeat; default: every one that can run)",
    )
    p.add_argument(
        "--answers-apart",
        action="store_true",
        help="each method answers on its own (default: every method's answers in one batch)",
    )
    p.set_defaults(command="demo")

    p = sub.add_parser("index", help="build an index from a corpus")
    p.add_argument("corpus", nargs="*", help="JSONL, Parquet, .txt/.md files (gzip ok) or folders")
    p.add_argument(
        "--out",
        required=True,
        help="index directory (created; an existing index is replaced atomically)",
    )
    _add_build_args(p)
    p.add_argument("--demo", action="store_true", help="index the built-in demo corpus")
    p.add_argument(
        "--add",
        action="store_true",
        help="add CORPUS to the index in --out (only new text is extracted and embedded)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="rebuild --out even when its manifest is damaged or unreadable (it is replaced)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="count the LLM prompts and tokens the index would cost; write nothing",
    )
    _calibrate_flag(p)
    p.set_defaults(command="index")

    p = sub.add_parser(
        "reindex",
        help="update an index to what its source holds now (scheduled runs; idempotent, locked)",
    )
    p.add_argument("corpus", nargs="+", help="the source: files or folders, as for index")
    p.add_argument("--out", required=True, help="index directory (built when absent)")
    _add_build_args(p)
    p.set_defaults(command="reindex")

    p = sub.add_parser(
        "import", help="make an engine index of a GraphRAG, LightRAG or HippoRAG index"
    )
    p.add_argument(
        "source",
        help="what the other system wrote: GraphRAG's output/ folder, LightRAG's working_dir, "
        "HippoRAG's OpenIE JSON",
    )
    p.add_argument("--out", required=True, help="index directory (replaced atomically)")
    p.add_argument(
        "--from",
        dest="system",
        choices=["graphrag", "hipporag", "lightrag"],
        help="the system that wrote SOURCE (default: recognised from its files)",
    )
    p.add_argument(
        "--corpus",
        nargs="+",
        default=[],
        help="hipporag: the corpus JSONL its OpenIE was run on (ids and texts come from it)",
    )
    p.add_argument("--config", help="index config YAML: the embedder and tokenizer the vectors use")
    p.set_defaults(command="import")

    p = sub.add_parser("info", help="describe an index")
    p.add_argument("index")
    p.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    p.add_argument(
        "--verify", action="store_true", help="check every file against its sha256 (reads all)"
    )
    p.set_defaults(command="info")

    p = sub.add_parser("generate", help="answer a JSONL file of prompts with the configured LLM")
    p.add_argument(
        "prompts", help='JSONL: {"id": ..., "prompt": "..."} or {"id": ..., "messages": [...]}'
    )
    p.add_argument("--out", help="JSONL of answers (written atomically)")
    p.add_argument("--config", help="YAML config with a models.llm section")
    p.add_argument("--backend", choices=["none", "transformers", "openai", "vllm"])
    p.add_argument("--model")
    p.add_argument("--base-url", dest="base_url")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--stage", default="generate", help="name under which tokens are accounted")
    p.add_argument("--dry-run", action="store_true", help="count prompts and tokens, call no model")
    _calibrate_flag(p)
    p.set_defaults(command="generate")

    p = sub.add_parser("query", help="run a method over a question file (batch-first, resumable)")
    p.add_argument(
        "index", help="index directory, or 'none' for questions with their own graphs (KBQA)"
    )
    p.add_argument(
        "questions", help="question JSONL (../shared/data/*_dev.jsonl, your own) or 'demo'"
    )
    p.add_argument(
        "--method",
        required=True,
        action="append",
        help="method config YAML (configs/methods/, configs/lego/) or a registered method name: "
        + ", ".join(_registered_methods())
        + "; repeat it to run several methods in one process (models loaded once)",
    )
    p.add_argument(
        "--out",
        required=True,
        help="run folder (re-run the same command to resume); with several --method, the "
        "folder that holds one run folder per method",
    )
    p.add_argument(
        "--label",
        action="append",
        help="the run's name in reports (default: the method's name or its YAML file's stem); "
        "with several --method, one --label each, naming their run folders too",
    )
    p.add_argument("--batch-size", type=int, help="questions per batch (default: config)")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--retrieval-only", action="store_true", help="rank passages, generate nothing")
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at an answer prompt that fails after every retry (default: record it and go on)",
    )
    p.add_argument("--llm-backend", choices=["none", "transformers", "openai", "vllm"])
    p.add_argument("--llm-model")
    p.add_argument("--base-url", dest="base_url")
    p.add_argument("--dry-run", action="store_true", help="count LLM prompts and tokens only")
    _calibrate_flag(p)
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="ray: shard the question batches over Ray actors (same run folder as local)",
    )
    p.add_argument(
        "--address", help="Ray cluster: local (start one), auto (join), or ray://host:port"
    )
    p.add_argument("--workers", type=int, default=2, help="Ray actors (with --executor ray)")
    p.add_argument(
        "--gpus-per-worker",
        type=float,
        help="GPUs per Ray actor (default: 1 when a model of the config is on CUDA, else 0)",
    )
    p.add_argument("--answers-together", action="store_true", help=TOGETHER_HELP)
    p.set_defaults(command="query")

    p = sub.add_parser("ask", help="answer one question typed here with one or more methods")
    p.add_argument("index", help="index directory")
    p.add_argument("question", help="the question, quoted as one argument")
    _method_args(p, "repeat it to compare methods")
    p.add_argument("--out", help="keep the run folders here (default: a temporary folder)")
    p.add_argument(
        "--width", type=_at_least(20), default=160, help="characters shown per context item"
    )
    p.set_defaults(command="ask")

    p = sub.add_parser(
        "export", help="write the entity graph for Gephi, Neo4j, GraphRAG or LightRAG"
    )
    p.add_argument("index", help="index directory")
    p.add_argument(
        "--format",
        required=True,
        choices=[
            "graphml",
            "gexf",
            "neo4j-csv",
            "parquet-graphrag",
            "parquet-graphrag-1x",
            "lightrag",
        ],
        help="graphml/gexf: one file for Gephi, networkx, yEd; neo4j-csv: files for "
        "neo4j-admin database import; parquet-graphrag: GraphRAG's output tables (2.x, 3.x); "
        "parquet-graphrag-1x: its create_final_* tables (1.x); lightrag: a LightRAG working "
        "directory",
    )
    p.add_argument(
        "--out",
        required=True,
        help="folder to write: new, empty or an earlier export (replaced as a whole)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace an --out folder that holds other files (they are listed, then removed)",
    )
    p.set_defaults(command="export")

    p = sub.add_parser("methods", help="list the registered methods, their papers and indexes")
    p.set_defaults(command="methods")

    p = sub.add_parser("compare", help="run several methods over one question file into one report")
    p.add_argument("index", help="index directory")
    p.add_argument("questions", help="question JSONL, or 'demo'")
    _method_args(p, "give two or more")
    p.add_argument("--out", required=True, help="folder for runs/<label>/ and report/")
    p.add_argument("--label", action="append", help="one per --method: the run's name in reports")
    p.add_argument("--k", default="1,2,5,10", help="cut-offs for Recall@k and Hit@k")
    p.add_argument("--limit", type=int, help="only the first N questions")
    p.add_argument("--batch-size", type=int, help="questions per batch")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed answer")
    p.add_argument("--answers-together", action="store_true", help=TOGETHER_HELP)
    p.set_defaults(command="compare")

    p = sub.add_parser("eval", help="score query runs into a report (tables, CSV, plots)")
    p.add_argument("runs", nargs="+", help="run folders written by `query`")
    p.add_argument("--out", required=True, help="report folder")
    p.add_argument("--k", default="1,2,5,10", help="cut-offs for Recall@k and Hit@k")
    p.add_argument("--compare", action="store_true", help="paired differences of RUN_A and RUN_B")
    p.add_argument("--judge", action="store_true", help="LLM-as-judge pairwise comparison")
    p.add_argument("--ragas", action="store_true", help="faithfulness, context recall/precision")
    p.add_argument(
        "--judge-backend", default="transformers", choices=["transformers", "openai", "vllm"]
    )
    p.add_argument("--judge-model")
    p.add_argument(
        "--judge-batch-size", type=int, help="transformers: prompts per forward pass (default 8)"
    )
    p.add_argument("--base-url", dest="base_url")
    p.add_argument("--judge-limit", type=int, help="judge only the first N questions")
    p.add_argument(
        "--judge-max-tokens", type=int, default=400, help="completion budget per verdict"
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="forecast the judge's prompts and tokens; send and write nothing",
    )
    _calibrate_flag(p)
    p.set_defaults(command="eval")

    p = sub.add_parser("bench", help="benchmarks live in bench/ (run them with python)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(command="bench_hint")
    return parser

"""Start llama.cpp's own OpenAI-compatible C++ server on loopback, serving one GGUF (default: the
packaged SmolLM2). The server comes from xllamacpp's prebuilt wheel (the `local-llm` extra), so
nothing is compiled; it runs in a child process started as a user would start it:

    python -m graphrag_engine.models.llama_server --model GGUF --port N [--parallel K]

Used by the tests and bench/."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from graphrag_engine.models import llm_yaml
from graphrag_engine.models.base import LLMError
from graphrag_engine.models.transformers_llm import smollm2_gguf


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """A llama.cpp server process serving one GGUF (default: the packaged SmolLM2)."""

    def __init__(
        self,
        model: str | None = None,
        alias: str = "smollm2",
        n_threads: int = 2,
        n_ctx: int = 2048,
        log: Path | None = None,
        embedding: bool = False,
        parallel: int = 1,
    ) -> None:
        if model is None:
            folder, name = smollm2_gguf()
            model = str(Path(folder) / name)
        self.port = free_port()
        self.alias = alias
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "graphrag_engine.models.llama_server", "--model", model]
        cmd += ["--alias", alias, "--port", str(self.port), "--threads", str(n_threads)]
        cmd += ["--ctx", str(n_ctx), "--parallel", str(parallel)]
        self.proc = subprocess.Popen(
            cmd + (["--embedding"] if embedding else []),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout_s: float = 180.0) -> LlamaServer:
        """Block until /v1/models answers; raise if the process dies or time runs out."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise LLMError(
                    f"llama.cpp server exited with code {self.proc.returncode}; is the local-llm extra (xllamacpp) installed?"
                )
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.stop()
        raise LLMError(f"llama.cpp server did not answer within {timeout_s} s")

    def stop(self) -> None:
        """Terminate the server."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def query_flags(self) -> list[str]:
        """`graphrag-engine query` flags that send its LLM prompts to this server."""
        return ["--llm-backend", "openai", "--llm-model", self.alias, "--base-url", self.url]

    def llm_yaml(self, read_timeout_s: float = 600.0) -> str:
        """A config's `models.llm` section that sends its prompts to this server (it decodes
        only as many requests together as it has slots, so a queued request may wait: hence the
        long read timeout)."""
        return llm_yaml(
            backend="openai", model=self.alias, base_url=self.url, read_timeout_s=read_timeout_s
        )

    def __enter__(self) -> LlamaServer:
        return self.wait()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(argv: list[str] | None = None) -> int:
    """Run llama.cpp's server in this process until SIGTERM or SIGINT."""
    ap = argparse.ArgumentParser(description="llama.cpp's OpenAI-compatible server on loopback")
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--alias", default="smollm2", help="the model name the server reports")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048, help="context tokens of each slot")
    ap.add_argument("--parallel", type=int, default=1, help="requests decoded together")
    ap.add_argument("--embedding", action="store_true", help="serve /v1/embeddings (mean-pooled)")
    args = ap.parse_args(argv)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx * args.parallel  # llama.cpp splits the context among the slots
    if args.embedding:
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # listens until it is dropped
    stop.wait()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(serve())

"""Start llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) on loopback, as a
user would: `python -m llama_cpp.server --model GGUF --port N`. Used by tests and bench/."""

from __future__ import annotations

import socket
import subprocess
import sys
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
    ) -> None:
        if model is None:
            folder, name = smollm2_gguf()
            model = str(Path(folder) / name)
        self.port = free_port()
        self.alias = alias
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                model,
                "--model_alias",
                alias,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_threads",
                str(n_threads),
                "--n_ctx",
                str(n_ctx),
                "--embedding",
                str(embedding),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout_s: float = 180.0) -> LlamaServer:
        """Block until /v1/models answers; raise if the process dies or time runs out."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise LLMError(
                    f"llama.cpp server exited with code {self.proc.returncode}; is llama-cpp-python[server] installed?"
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
        """A config's `models.llm` section that sends its prompts to this server (one request
        is served at a time, so a queued request may wait: hence the long read timeout)."""
        return llm_yaml(
            backend="openai", model=self.alias, base_url=self.url, read_timeout_s=read_timeout_s
        )

    def __enter__(self) -> LlamaServer:
        return self.wait()

    def __exit__(self, *exc) -> None:
        self.stop()

"""llama-cpp-python's own OpenAI-compatible server (its `server` extra) as a child process on
127.0.0.1, serving the bundled Gemma 3 270M GGUF (or any GGUF file), for tests and benchmarks
that reach the embedded model through `openai:` models.

    with start_llama_server(chat_format="gemma") as server:
        session = Session(model="openai:gemma", settings=ModelSettings(base_url=server.base_url, api="chat"))

The bundled GGUF carries no chat template, so the chat API needs one of llama-cpp-python's
registered chat formats (`chat_format=`; `gemma` for Gemma: its turns, and no system message:
llama-cpp-python's `gemma` format drops system messages). The model answers to any name;
`alias` is what `/v1/models` lists. llama_cpp is imported by the child only.

Its prompt cache (`cache=True`, llama-cpp-python's `--cache`) keeps each state with its logits
uncounted: with Gemma's 262,144-token vocabulary about 1 MiB per prompt token, so the server
grew to 21 GiB within 90 calls of `decomp/letter_cat`. Leave it off, but for short comparisons.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["LlamaServer", "start_llama_server"]

#: llama-cpp-python's extra that holds its server.
INSTALL_HINT = "pip install 'llama-cpp-python[server]' (the `test` extra holds it)"


@dataclass
class LlamaServer:
    """A running server: its process and base URL (`http://127.0.0.1:PORT/v1`). Stop it with
    `stop()` or by leaving its `with` block."""

    process: subprocess.Popen
    base_url: str
    _stderr: IO[bytes] | None = field(default=None, repr=False)

    def stop(self, timeout: float = 30.0) -> int:
        """Terminate the server (killed if it lingers past `timeout` seconds); its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        return self.process.returncode

    def __enter__(self) -> "LlamaServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def peak_rss_mb(self) -> float | None:
        """The running server's peak resident memory (MiB; Linux's VmHWM), or None where unknown."""
        try:
            lines = Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
        except OSError:
            return None
        found = next((line.split()[1] for line in lines if line.startswith("VmHWM:")), None)
        return round(int(found) / 1024, 1) if found is not None else None

    def errors(self) -> str:
        """The last 2,000 characters the server wrote to stderr."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-2000:]


def server_command(model: Path, port: int, *, chat_format: str | None = None, alias: str = "gemma",
                   n_ctx: int = 2048, threads: int | None = None, cache: bool = False) -> list[str]:
    """The command line that starts llama-cpp-python's server on 127.0.0.1:`port`: `threads`
    for generation and prompt batches (None: every usable core), its prompt cache on with
    `cache`."""
    from decomp.runtime.models.local import usable_cores

    threads = threads or usable_cores()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
               "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads),
               "--cache", "true" if cache else "false", "--host", "127.0.0.1", "--port", str(port),
               "--verbose", "false"]
    return command + (["--chat_format", chat_format] if chat_format else [])


def start_llama_server(model: str | Path | None = None, *, chat_format: str | None = None, alias: str = "gemma",
                       n_ctx: int = 2048, threads: int | None = None, cache: bool = False,
                       ready_timeout: float = 120.0) -> LlamaServer:
    """Start the server on a free port of 127.0.0.1 with `model` (a GGUF path; None: the bundled
    Gemma 3 270M) and return it once it answers `/v1/models`. A server that exits or does not
    answer within `ready_timeout` seconds is stopped and a RuntimeError says why, with its stderr."""
    from decomp.runtime.models.local import DEFAULT, weights_path

    path = Path(model) if model is not None else weights_path(DEFAULT)
    port = _free_port()
    stderr = tempfile.TemporaryFile()
    command = server_command(path, port, chat_format=chat_format, alias=alias, n_ctx=n_ctx, threads=threads,
                             cache=cache)
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    server = LlamaServer(process, f"http://127.0.0.1:{port}/v1", stderr)
    try:
        _wait_ready(server, ready_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: LlamaServer, timeout: float) -> None:
    """Return once `server` answers `/v1/models`; a RuntimeError when it exits or `timeout` passes."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: never a proxy
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"llama-cpp-python's server exited with code {server.process.returncode} "
                               f"({INSTALL_HINT}):\n{server.errors()}")
        try:
            opener.open(server.base_url + "/models", timeout=2).close()
            return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"llama-cpp-python's server did not answer within {timeout:g}s:\n{server.errors()}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]

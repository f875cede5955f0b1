"""What the letter_cat benchmarks share (harness.py holds what every benchmark shares): a perfect model for the bundled `decomp/letter_cat_llm` program,
the rows it is run on, the out-of-process mock server, and the longest dependent chain of a trace.

`respond(prompt)` answers every prompt letter_cat_llm.decomp renders, with string operations only:

* a decomposer prompt (ending in `QS:`): the next `QS:` line for the last `QC:` question, chosen
  by how many `QS:` lines follow that question (split, foreach str_position, merge, EOQ);
* a few-shot prompt (ending in `A:`): the JSON answer to the last `Q:` (the words, one letter,
  or the letters joined with the asked-for delimiter).

The mock server imports it as `benchmarks.letter_cat_oracle:respond`; `mock_server()` puts the
repository root on the child's PYTHONPATH so that this works from any working directory. This
module imports nothing from `decomp` at import time, so the server child stays light.
"""
from __future__ import annotations

import io
import json
import os
import random
import re
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from benchmarks.harness import REPO

PROGRAM = REPO / "programs" / "decomp" / "letter_cat_llm.decomp"
RESPONDER = "benchmarks.letter_cat_oracle:respond"

DELIMITERS = {"space": " ", "comma": ",", "semi-colon": ";"}
POSITIONS = (1, 2, 3, 4, "last")  # every word has at least 4 letters
# A fixed vocabulary of 6,912 made-up words of 5 to 7 letters (onset + vowel pair + ending; every
# combination spells a different word). Rows draw their words without replacement, so up to
# 6912 / WORDS rows share no word: every split, str_position and decomposer prompt of a run is
# then different, and a cached first run has (almost) no cache hits of its own.
_ONSETS = ("B", "C", "D", "F", "G", "H", "J", "K", "L", "M", "N", "P", "R", "S", "T", "V", "W", "Z",
           "Br", "Ch", "Dr", "Gr", "St", "Tr")
_MIDDLES = ("ar", "el", "in", "or", "un", "al", "en", "ir", "ol", "ur", "an", "es", "ic", "om", "ut", "ax",
            "ed", "is", "ob", "um", "ab", "ex", "id", "oz")
_ENDINGS = ("do", "ga", "ko", "la", "mo", "na", "ri", "sa", "te", "vo", "wen", "zy")
WORDS = tuple(a + b + c for a in _ONSETS for b in _MIDDLES for c in _ENDINGS)

_QUESTION = re.compile(r'Take the (?:letters at position (\d+)|last letters) of the words in "([^"]*)" '
                       r"and concatenate them using an? ([a-z-]+)\.")
_POSITION = re.compile(r'What is the letter at position (\d+) of "([^"]*)"\?')
_LAST = re.compile(r'What is the last letter of "([^"]*)"\?')
_MERGE = re.compile(r"Concatenate (\[.*\])(?: using an? ([a-z-]+))?\.")
_SPLIT = 'What are the words in "'


# ---------------------------------------------------------------- the rows
def question(words: list[str], position: int | str, delimiter: str) -> str:
    which = "last letters" if position == "last" else f"letters at position {position}"
    return (f'Take the {which} of the words in "{" ".join(words)}" and concatenate them '
            f"using a {delimiter}.")


def make_rows(n: int, words: int = 5, seed: int = 0) -> list[dict]:
    """`n` rows {"id", "question", "answer"}: `words` words each from the fixed vocabulary (drawn
    without replacement until it runs out, then again), positions 1-4 and "last", delimiters
    space, comma and semi-colon; the same arguments always give the same rows."""
    rng = random.Random(seed)
    pool: list[str] = []
    rows = []
    for i in range(n):
        chosen = []
        while len(chosen) < words:
            if not pool:
                pool = list(WORDS)
                rng.shuffle(pool)
            chosen.append(pool.pop())
        text = question(chosen, rng.choice(POSITIONS), rng.choice(tuple(DELIMITERS)))
        rows.append({"id": f"row{i}", "question": text, "answer": expected(text)})
    return rows


def expected(text: str) -> str:
    """The right answer to a letter-concatenation question."""
    m = _QUESTION.fullmatch(text)
    if m is None:
        raise ValueError(f"not a letter-concatenation question: {text!r}")
    position, name, delimiter = m.groups()
    index = int(position) - 1 if position else -1
    return DELIMITERS[delimiter].join(word[index] for word in name.split())


def dataset_rows(rows: list[dict]) -> list:
    """`make_rows` output as the `Row`s `run_rows` takes."""
    from decomp.runtime.storage.datasets import Row

    return [Row(i, r["id"], {"question": r["question"]}, None, r["answer"]) for i, r in enumerate(rows)]


# ---------------------------------------------------------------- the model
def respond(prompt: str, request_json: dict | None = None) -> str:
    """A perfect model for letter_cat_llm.decomp's prompts ("" for a prompt it does not know)."""
    if prompt.endswith("QS:"):
        return _next_step(prompt)
    start = prompt.rfind("\nQ: ") + 1  # 0 when not found: the prompt may start with it
    if not prompt.startswith("Q: ", start):
        return ""
    end = prompt.find("\n", start)
    return _answer(prompt[start + 3:end if end >= 0 else len(prompt)])


def _next_step(prompt: str) -> str:
    start = prompt.rfind("\nQC: ") + 1
    if not prompt.startswith("QC: ", start):
        return ""
    end = prompt.find("\n", start)
    m = _QUESTION.fullmatch(prompt[start + 4:end])
    if m is None:
        return " [EOQ]"
    done = prompt.count("\nQS: ", end)
    position, name, delimiter = m.groups()
    if done == 0:
        return f' [split] What are the words in "{name}"?'
    if done == 1:
        if position:
            return f' (foreach) [str_position] What is the letter at position {position} of "#1"?'
        return ' (foreach) [str_position] What is the last letter of "#1"?'
    if done == 2:
        return f" [merge] Concatenate #2 using a {delimiter}."
    return " [EOQ]"


def _answer(q: str) -> str:
    if q.startswith(_SPLIT):
        return " " + json.dumps(q[len(_SPLIT):q.rindex('"')].split())
    m = _POSITION.fullmatch(q)
    if m is not None:
        return ' "' + m.group(2)[int(m.group(1)) - 1] + '"'
    m = _LAST.fullmatch(q)
    if m is not None:
        return ' "' + m.group(1)[-1] + '"'
    m = _MERGE.fullmatch(q)
    if m is not None:
        return " " + json.dumps(DELIMITERS.get(m.group(2) or "", "").join(json.loads(m.group(1))))
    return ""


# ---------------------------------------------------------------- the mock server
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy


@dataclass
class Server:
    """The mock server's child process: its base URL and process id."""

    base_url: str
    pid: int

    def stats(self) -> dict:
        """{"requests", "in_flight", "max_in_flight", "faults"} since the last reset."""
        with _LOCAL.open(f"{self.base_url}/stats", timeout=10) as reply:
            return json.loads(reply.read())

    def reset_stats(self) -> None:
        request = urllib.request.Request(f"{self.base_url}/reset-stats", data=b"{}", method="POST")
        with _LOCAL.open(request, timeout=10) as reply:
            reply.read()

    def cpu_seconds(self) -> float | None:
        """CPU time the server process has used so far (Linux /proc; None elsewhere)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None


@contextmanager
def mock_server(latency: float, responder: str = RESPONDER) -> Iterator[Server]:
    """The mock OpenAI server in a child process answering with `respond` (or another
    `module:function` of this checkout, `responder`)."""
    from decomp.runtime.testing.mock_server import start_subprocess, stop_subprocess

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), saved) if p)
    try:
        proc, base_url = start_subprocess(latency=latency, responder=responder)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        yield Server(base_url, proc.pid)
    finally:
        stop_subprocess(proc)


# ---------------------------------------------------------------- running and measuring
def load_program(session):
    return session.load(PROGRAM)


def run_batch(session, module, rows: list) -> tuple[Any, list[dict]]:
    """`run_rows` into memory: (BatchSummary, the result records in row order)."""
    import asyncio

    from decomp.runtime.runs.batch import run_rows

    out = io.StringIO()
    summary = asyncio.run(run_rows(session, module, rows, out))
    return summary, records_in_order(out.getvalue())


def records_in_order(results: str) -> list[dict]:
    """The records of results lines (`run_rows`' output), in row order."""
    from decomp.runtime.storage.jsonl import read_lines

    return sorted((line.value for line in read_lines(results)), key=lambda r: r["index"])


def openai_session(base_url: str, concurrency: int = 16, cache=None, session_class=None):
    """A session whose model is the mock server (`openai:oracle` at `base_url`)."""
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session

    return (session_class or Session)(model="openai:oracle", settings=ModelSettings(base_url=base_url),
                                      scheduler=Scheduler(concurrency), cache=cache)


def warm_up(base_url: str) -> None:
    """One row on a throw-away session, so that the timed run does not pay one-time imports (the
    openai client loads its HTTP stack, ~140 modules, on its first request). Callers reset the
    server's statistics after it."""
    session = openai_session(base_url, 1)
    run_batch(session, load_program(session), dataset_rows(make_rows(1, seed=12345)))


def fraction_correct(records: list[dict], rows: list[dict]) -> float:
    gold = {r["id"]: r["answer"] for r in rows}
    right = sum(1 for rec in records if "error" not in rec and rec["answer"] == gold.get(rec["id"]))
    return right / len(rows) if rows else 0.0


def dependent_calls(node) -> int:
    """Model calls on the longest chain of calls that wait for each other, below a trace node.

    A node's children ran one after another (a decomposer asks for a line, runs it, asks for the
    next; a step's call waits for its query), except the `item` children of a fan-out step, which
    ran at once: so chain(node) = [node is a model call] + sum of chain(non-item child) + max of
    chain(item child). (Steps of a fixed `program` also run at once when independent; letter_cat
    has none, and for them this sum is an upper bound.)"""
    own = 1 if node.kind == "model" else 0
    serial = sum(dependent_calls(c) for c in node.children if c.kind != "item")
    parallel = max((dependent_calls(c) for c in node.children if c.kind == "item"), default=0)
    return own + serial + parallel


def tracing_session_class():
    """A `Session` that keeps every row's trace (run_rows itself writes only the answers)."""
    from decomp.runtime.engine.session import Session

    class TracingSession(Session):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.traces = []

        async def arun(self, *args, **kw):
            result = await super().arun(*args, **kw)
            self.traces.append(result.trace)
            return result

    return TracingSession

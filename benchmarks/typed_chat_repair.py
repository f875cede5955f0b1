"""Benchmark: typed answers from a chat model that wraps its JSON the way chat models do; rows
lost to parse failures by decomp (`returns=list[str]`) and by DSPy (a typed signature
`question: str -> answer: list[str]`, ChatAdapter and JSONAdapter), on the same server, the
same questions and the same replies, side by side in one run.

CALLS questions (--calls, 1,000) such as `What are the words in "Nidzy Gromna Pozga"?`, 2 to 5
made-up words each (benchmarks/letter_cat_oracle.py's vocabulary, --seed); the gold answer is
the list of the phrase's words. One `MockOpenAIServer` in this process answers every system.
Its responder (`ChatLikeResponder`) answers a question in the format the request asks for, its
*value* written in a style decided by the question's index alone (`styles`: exactly one
question in ten malformed, the rest drawn with the seed), so every system sees the same reply
to the same question:

    value        plain prompt (decomp): the list; DSPy's ChatAdapter: the list inside
                 `[[ ## answer ## ]]` ... `[[ ## completed ## ]]`; DSPy's JSONAdapter (its prompt
                 says "Respond with a JSON object"): the object {"answer": the list}
    bare         the value as JSON
    fenced       in a ```json fence
    before       a sentence before it, quoting the phrase
    after        a sentence after it
    note         a trailing note after it, quoting a word
    chatty       a sentence, the fenced value, a sentence
    truncated    (malformed) the reply cut two letters into its last word, as by max_tokens
    quotes       (malformed) the value in single quotes (Python's repr)
    bullets      (malformed) the value replaced by a bulleted list in prose

Two server modes (--modes): `chat-like` ignores `response_format`; `honours` answers a request
that carries `response_format` (json_schema or json_object) with the bare, valid value and no
malformation, as a server that decodes under it does. A request without one is answered
chat-like in both modes.

Systems, one after another in each mode, each with --concurrency calls in flight and a warm-up
question first (not counted):

    decomp            a `.decomp` program whose one `prompt` handler declares returns=list[str]
                      (stop=[]: the default stop "\\n" would cut a fenced reply), model
                      `openai:mock` on the chat API (constrain="auto": decomp sends
                      response_format json_schema), `run_rows`, no cache, no retries
    dspy_chat         dspy.Predict with ChatAdapter (and its fallback to JSONAdapter after a
                      parse error: a second request), LM "openai/mock"
    dspy_json         dspy.Predict with JSONAdapter, LM "openai/mock": litellm does not know the
                      model, so DSPy sends no response_format
    dspy_json_schema  JSONAdapter, LM "openai/gpt-4o-mini" pointed at the same server: litellm
                      lists it as supporting structured outputs, so DSPy sends response_format
                      json_schema

DSPy (3.4.1) runs in its own interpreter (--dspy-python; default /tmp/dspyvenv/bin/python if it
exists, else `python` on PATH if it imports dspy), as this script with `--dspy-side`, in
threads. Without one, the DSPy entries say `"skipped"` and why; no figure is made up. DSPy is no
dependency of the project; give it a venv of its own:

    python3 -m venv /tmp/dspyvenv && /tmp/dspyvenv/bin/pip install dspy==3.4.1

A row is lost when the system failed it (decomp: a failed outcome or an error; DSPy: an
exception, AdapterParseError or other) or answered other than the gold list. Each entry gives
`lost`, `lost_rate`, `failed` (of those lost, failed outright), `wrong`, `lost_by_style`,
`requests` (the server's, ChatAdapter's fallback included), `response_format` (what its
requests carried: {"json_schema": n, ...}), `schema_sent` (the first JSON schema sent), `errors`
(DSPy's exceptions by class) and `seconds` (wall time of the calls; decomp's
client shares this process with the server, DSPy's does not).

    python benchmarks/typed_chat_repair.py [--calls 1000] [--seed 0] [--concurrency 16]
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/typed_chat_repair.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402
from benchmarks.letter_cat_oracle import WORDS  # noqa: E402

NAME = "typed_chat_repair"
SCRIPT = REPO / "benchmarks" / "typed_chat_repair.py"
DSPY_PYTHON = Path("/tmp/dspyvenv/bin/python")
MODES = ("chat-like", "honours")
WELL_FORMED = ("bare", "fenced", "before", "after", "note", "chatty")
MALFORMED = ("truncated", "quotes", "bullets")
#: The DSPy runs: name -> (adapter, LM model name).
DSPY_RUNS = {"dspy_chat": ("chat", "openai/mock"), "dspy_json": ("json", "openai/mock"),
             "dspy_json_schema": ("json", "openai/gpt-4o-mini")}
WARM_UP = "Warm Up"  # the warm-up question's phrase (no word of the vocabulary has a space)
_QUESTION = re.compile(r'What are the words in "([^"]*)"\?')
PROGRAM = '''handler words = prompt(file="words.txt", returns=list[str], stop=[], max_tokens=200)

program main(question) {
    QS: [words] #question
}
main main
'''
FEWSHOT = 'Answer with a JSON list of strings.\n\nQ: What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\n'


# ---------------------------------------------------------------- the questions and reply styles
def make_rows(n: int, seed: int = 0) -> list[dict]:
    """`n` rows {"id", "question", "gold", "style"}: 2 to 5 words each from the fixed vocabulary
    (drawn without replacement, so every phrase differs), the style `styles(n, seed)` gives."""
    rng = random.Random(seed)
    pool = list(WORDS)
    rng.shuffle(pool)
    rows = []
    for i, style in enumerate(styles(n, seed)):
        words = [pool.pop() for _ in range(rng.randint(2, 5))]
        rows.append({"id": f"q{i}", "question": f'What are the words in "{" ".join(words)}"?', "gold": words,
                     "style": style})
    return rows


def styles(n: int, seed: int = 0) -> list[str]:
    """The reply style of each question index: n // 10 of them malformed (chosen with the seed,
    the three kinds in turn), the others drawn among the well-formed styles."""
    rng = random.Random(f"styles-{seed}")
    broken = sorted(rng.sample(range(n), n // 10))
    kinds = {index: MALFORMED[k % len(MALFORMED)] for k, index in enumerate(broken)}
    return [kinds.get(i) or rng.choice(WELL_FORMED) for i in range(n)]


class ChatLikeResponder:
    """The mock server's responder: answers a words question in the requested format, styled by
    the question's index (unknown questions: bare); with `honour`, a request that carries
    `response_format` gets the bare, valid value."""

    def __init__(self, rows: list[dict], honour: bool = False):
        self.style_of = {r["question"]: r["style"] for r in rows}
        self.honour = honour

    def __call__(self, prompt: str, request: dict) -> str:
        found = _QUESTION.findall(prompt)
        if not found:
            return "I am not sure what you are asking."
        phrase = found[-1]
        words = phrase.split()
        fmt = reply_format(prompt)
        value = {"answer": words} if fmt == "json" else words
        if self.honour and request.get("response_format"):
            return json.dumps(value)
        return reply(fmt, value, self.style_of.get(f'What are the words in "{phrase}"?', "bare"), words)


def reply_format(prompt: str) -> str:
    """"json" for DSPy's JSONAdapter, "chat" for its ChatAdapter, else "plain"."""
    if "Respond with a JSON object" in prompt:
        return "json"
    if "[[ ## completed ## ]]" in prompt:
        return "chat"
    return "plain"


def reply(fmt: str, value, style: str, words: list[str]) -> str:
    """The reply text: `value` styled, placed where `fmt` puts it."""
    if style == "truncated":
        full = reply(fmt, value, "bare", words)
        return full[:full.rindex(words[-1]) + 2]
    text = styled(value, style, words)
    return f"[[ ## answer ## ]]\n{text}\n\n[[ ## completed ## ]]" if fmt == "chat" else text


def styled(value, style: str, words: list[str]) -> str:
    """`value` written in `style` (any but "truncated")."""
    data = json.dumps(value)
    phrase = " ".join(words)
    return {
        "bare": data,
        "fenced": f"```json\n{data}\n```",
        "before": f'Sure! Here are the words in "{phrase}":\n{data}',
        "after": f"{data}\nThese are the words in the order they appear.",
        "note": f'{data}\n\nNote: I kept "{words[0]}" capitalised as in the question.',
        "chatty": f"Here is the list you asked for:\n\n```json\n{data}\n```\n\nLet me know if you need anything else!",
        "quotes": repr(value),
        "bullets": "The words are:\n" + "\n".join(f"- {w}" for w in words),
    }[style]


# ---------------------------------------------------------------- decomp's side
def run_decomp(base_url: str, rows: list[dict], folder: Path, concurrency: int) -> tuple[list[dict], float]:
    """The program over `rows` with `run_rows`: each row's {"answer", "lost_by": None | "failed"
    | "error"} in order, and the wall time of the run (after one warm-up question)."""
    import asyncio
    import io

    from benchmarks.letter_cat_oracle import records_in_order
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.runs.batch import run_rows
    from decomp.runtime.storage.datasets import Row

    (folder / "words.txt").write_text(FEWSHOT, encoding="utf-8")
    (folder / "words.decomp").write_text(PROGRAM, encoding="utf-8")

    def batch(items: list[dict]) -> list[dict]:
        session = Session(model="openai:mock", settings=ModelSettings(base_url=base_url, api="chat"),
                          scheduler=Scheduler(concurrency), cache=None)
        module = session.load(folder / "words.decomp")
        out = io.StringIO()
        asyncio.run(run_rows(session, module, [Row(i, r["id"], {"question": r["question"]}, None, None)
                                               for i, r in enumerate(items)], out))
        return records_in_order(out.getvalue())

    batch(warm_up_rows())
    started = time.perf_counter()
    records = batch(rows)
    seconds = time.perf_counter() - started
    return [{"answer": r.get("answer"), "failed": r["outcome"] != "ok"} for r in records], seconds


def warm_up_rows() -> list[dict]:
    """The question each system answers once before it is timed (its requests not counted)."""
    return [{"id": "warm", "question": f'What are the words in "{WARM_UP}"?', "gold": WARM_UP.split(),
             "style": "bare"}]


# ---------------------------------------------------------------- DSPy's side
def find_dspy_python(given: Path | None) -> tuple[Path | None, str | None]:
    """The interpreter to run DSPy with, or None and why there is none."""
    candidates = [given] if given else [DSPY_PYTHON, shutil.which("python")]
    for python in candidates:
        if python and Path(python).exists() and _imports_dspy(Path(python)):
            return Path(python), None
    tried = ", ".join(str(c) for c in candidates if c)
    return None, f"dspy is not installed: no interpreter that imports it ({tried or 'none found'}; --dspy-python)"


def _imports_dspy(python: Path) -> bool:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPATH", None)
    try:
        return subprocess.run([str(python), "-c", "import dspy"], env=env, capture_output=True,
                              timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_dspy(python: Path, base_url: str, rows: list[dict], folder: Path, run: str,
             concurrency: int) -> tuple[list[dict], float, str]:
    """This script with --dspy-side in DSPy's interpreter: each row's {"answer", "failed",
    "error"}, the wall time of the calls, and DSPy's version."""
    adapter, model = DSPY_RUNS[run]
    questions = folder / "questions.json"
    questions.write_text(json.dumps([r["question"] for r in rows]), encoding="utf-8")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no network fetch at import
    env.pop("PYTHONPATH", None)
    argv = [str(python), str(SCRIPT), "--dspy-side", "--base-url", base_url, "--questions", str(questions),
            "--adapter", adapter, "--model", model, "--concurrency", str(concurrency)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the DSPy side failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    found = json.loads(lines[-1])
    return found["rows"], found["seconds"], found["dspy_version"]


def dspy_side(argv: list[str]) -> None:
    """In DSPy's interpreter: Predict over the questions, in threads; one JSON line
    {"rows": [{"answer", "failed", "error"}], "seconds", "dspy_version"}."""
    from concurrent.futures import ThreadPoolExecutor

    import dspy

    p = parser(__doc__)
    p.add_argument("--dspy-side", action="store_true")
    p.add_argument("--base-url", required=True)
    p.add_argument("--questions", type=Path, required=True)
    p.add_argument("--adapter", choices=("chat", "json"), required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args(argv)
    questions = json.loads(args.questions.read_text(encoding="utf-8"))
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    lm = dspy.LM(args.model, api_base=args.base_url, api_key="unused", cache=False)
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter() if args.adapter == "chat" else dspy.JSONAdapter())

    class Words(dspy.Signature):
        """List the words of the phrase in the question."""
        question: str = dspy.InputField()
        answer: list[str] = dspy.OutputField()

    predict = dspy.Predict(Words)

    def one(question: str) -> dict:
        try:
            return {"answer": predict(question=question).answer, "failed": False, "error": None}
        except Exception as exc:  # noqa: BLE001 - every exception loses the row; its class is reported
            return {"answer": None, "failed": True, "error": type(exc).__name__}

    one(warm_up_rows()[0]["question"])
    started = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        results = list(pool.map(one, questions))
    seconds = time.perf_counter() - started
    print(json.dumps({"rows": results, "seconds": seconds, "dspy_version": dspy.__version__}), flush=True)


# ---------------------------------------------------------------- scoring and the run
def tally(rows: list[dict], outcomes: list[dict], requests: list[dict], seconds: float) -> dict:
    """One system's figures in one mode."""
    lost = [(row, out) for row, out in zip(rows, outcomes) if out["failed"] or out["answer"] != row["gold"]]
    failed = sum(1 for _, out in lost if out["failed"])
    errors = Counter(out["error"] for _, out in lost if out.get("error"))
    entry = {"lost": len(lost), "lost_rate": round(len(lost) / len(rows), 4) if rows else 0.0,
             "failed": failed, "wrong": len(lost) - failed,
             "lost_by_style": dict(sorted(Counter(row["style"] for row, _ in lost).items())),
             "requests": len(requests), "response_format": sent_formats(requests), "seconds": round(seconds, 3)}
    schema = next((body["response_format"]["json_schema"].get("schema") for body in requests
                   if isinstance(body.get("response_format"), dict) and "json_schema" in body["response_format"]), None)
    if schema is not None:
        entry["schema_sent"] = schema
    if errors:
        entry["errors"] = dict(errors)
    return entry


def counted(requests: list[dict]) -> list[dict]:
    """The requests but the warm-up question's."""
    return [body for body in requests if WARM_UP not in json.dumps(body)]


def sent_formats(requests: list[dict]) -> dict:
    """How many requests carried each `response_format` type ("none": without one)."""
    kinds = Counter()
    for body in requests:
        fmt = body.get("response_format")
        kinds[fmt.get("type", "?") if isinstance(fmt, dict) else "none"] += 1
    return dict(sorted(kinds.items()))


def measure_mode(mode: str, rows: list[dict], folder: Path, dspy_python: Path | None, skipped: str | None,
                 args) -> tuple[dict, str | None]:
    """Every system against one server in `mode`: their entries, and DSPy's version."""
    from decomp.runtime.testing.mock_server import MockOpenAIServer

    entries, version = {}, None
    responder = ChatLikeResponder(rows + warm_up_rows(), honour=mode == "honours")
    with MockOpenAIServer(responder=responder, latency=args.latency, record=10 * len(rows) + 100) as server:
        server.reset_stats()
        outcomes, seconds = run_decomp(server.base_url, rows, folder / mode, args.concurrency)
        entries["decomp"] = tally(rows, outcomes, counted(server.requests), seconds)
        for run in DSPY_RUNS:
            if dspy_python is None:
                entries[run] = {"skipped": skipped}
                continue
            server.reset_stats()
            outcomes, seconds, version = run_dspy(dspy_python, server.base_url, rows, folder, run, args.concurrency)
            entries[run] = tally(rows, outcomes, counted(server.requests), seconds)
    return entries, version


def main(argv: list[str] | None = None) -> dict | None:
    argv = sys.argv[1:] if argv is None else argv
    if "--dspy-side" in argv:
        return dspy_side(argv)
    p = parser(__doc__)
    p.add_argument("--calls", type=int, default=1000, help="typed calls (questions) per system and mode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=16, help="calls in flight, every system")
    p.add_argument("--latency", type=float, default=0.0, help="seconds the server takes per request")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--dspy-python", type=Path, default=None,
                   help="a Python that imports dspy (default: /tmp/dspyvenv/bin/python, else python on PATH)")
    args = p.parse_args(argv)
    if args.calls < 1 or args.concurrency < 1 or args.latency < 0:
        p.error("--calls and --concurrency must be at least 1, --latency at least 0")
    rows = make_rows(args.calls, args.seed)
    dspy_python, skipped = find_dspy_python(args.dspy_python)
    record = {"benchmark": NAME, "calls": args.calls, "seed": args.seed, "concurrency": args.concurrency,
              "latency_s": args.latency, "styles": dict(sorted(Counter(r["style"] for r in rows).items())),
              "modes": {}, "dspy_version": None}
    with tempfile.TemporaryDirectory(prefix="decomp-typed-chat-") as tmp:
        for mode in args.modes:
            (Path(tmp) / mode).mkdir()
            record["modes"][mode], version = measure_mode(mode, rows, Path(tmp), dspy_python, skipped, args)
            record["dspy_version"] = version or record["dspy_version"]
    if skipped:
        record["dspy_skipped"] = skipped
    return emit(record)


if __name__ == "__main__":
    main()

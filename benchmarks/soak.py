"""Soak: one batch run whose rows mix every hostile case of issue 29 with ordinary rows; every
row must end, the hostile ones with their own worded error, the others answered.

    python benchmarks/soak.py [--rows 120] [--limit 1.5] [--wall 600] [--keep DIR]

The run is the real command (`decomp run FILE --input rows.jsonl`, in a subprocess) on a
program of five steps, each given the row's question, each of which answers an ordinary one
with itself (the prompts through the server below, which answers a prompt's last line):

  [k]  a `--plugin` kind that, on its case, blocks its thread (`time.sleep`), awaits forever,
       raises SystemExit or KeyboardInterrupt;
  [f]  a Python function that sleeps, spins, exits, allocates far past its memory limit, or
       answers 40 MiB of text;
  [t]  a prompt whose Jinja template doubles a value through `|string` as often as the
       question says (the probe's bomb);
  [s]  a prompt whose model is a server that misbehaves on its case (trickles its body one
       byte at a time, sends its headers then hangs, closes mid-body), within the attempt and call
       deadlines (`--attempt-deadline 3 --call-deadline 8`);
  [w]  a Python function sharing [f]'s worker processes (issue 41) that, on its case, leaves a
       thread writing forged replies on every socket it holds (an ordinary row answered with
       "pool-shift" is a wrong answer), writes garbage to descriptors 3-39, or raises its
       RLIMIT_DATA and allocates 1.5 GiB; it answers its own row with the question;
  [m]  the program's metric (issue 41): every row has its question as gold, and the metric, a
       function of a module file that a `--plugin` registers (`metric soak_score`), scores an
       answer 1.0 when it is its gold, except on its cases' gold, where it loops forever, raises
       SystemExit(3) or KeyboardInterrupt, allocates past `--metric-memory` (256 MiB) or returns
       NaN (under `--metric-timeout`, 1 s): each such row must end in its worded metric error,
       its answer kept and scored 0, while every row that answered is scored 1.0. Then
       `decomp eval --gold rows.jsonl --pred RUN --metric soak_metrics:score` scores the run
       again with the same function named `module:function`: it must warn about each metric
       case's row in its words (their predictions are the run's errors, but the metric sees
       their gold) and score every other row.

Row i gets case `CASES[i % len(CASES)]`. A row is *right* when an ordinary one answers its own
question and a hostile one ends with its case's words; a *crash* is a row error that is an
internal error, or a traceback on stderr; a *hang* is a row with no result line when the run
ended (the run is killed after `--wall` seconds). Prints one JSON line: {"benchmark": "soak",
"rows", "right", "wrong", "crashes", "hangs", "exit_code", "wall_s", "wrong_rows" (the first
ten: index, case, error), "peak_rss_mb", "cases", "metric_timeout_s", "eval" (the `decomp eval`
pass: "exit_code", "metric_errors" and "expected_metric_errors", "score" and "expected_score",
"wrong_warnings", "crashes", "wall_s")}.
"""
from __future__ import annotations

if __package__ in (None, ""):  # `python benchmarks/soak.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from benchmarks.harness import emit, parser  # noqa: E402

#: Each case: the question that triggers it, and words its row's error must hold (None: answered;
#: "A|B": either; a template bomb stops at its size limit, or on a loaded machine at its deadline).
CASES: dict[str, tuple[str, str | None]] = {
    "ordinary": ("plain question", None),
    "kind-sleep": ("kind-sleep", "ran longer than its time limit"),
    "kind-await": ("kind-await", "ran longer than its time limit"),
    "kind-exit": ("kind-exit", "raised SystemExit"),
    "kind-interrupt": ("kind-interrupt", "raised KeyboardInterrupt"),
    "python-sleep": ("python-sleep", "ran longer than its time limit"),
    "python-spin": ("python-spin", "ran longer than its time limit"),
    "python-exit": ("python-exit", "SystemExit"),
    "python-memory": ("python-memory", "memory limit"),
    "huge-answer": ("huge-answer", "over the limit of 16 MiB"),
    "template-bomb": ("bomb 60", "TemplateLimitError|ran longer than its time limit"),
    "server-trickle": ("server-trickle", "deadline"),
    "server-hang": ("server-hang", "deadline"),
    "server-close": ("server-close", None),  # retried per policy; words checked below
}
#: The worker pool's cases (the [w] step): a row of these may also answer its own question.
POOL_CASES: dict[str, tuple[str, str]] = {
    "pool-shift": ("pool-shift", "not the reply to this call"),
    "pool-scribble": ("pool-scribble", "not the reply to this call"),
    "pool-escape": ("pool-escape", "memory limit"),
}
CASES.update(POOL_CASES)
#: The metric's cases (the [m] step): the row is answered, then its metric fails in these words.
METRIC_CASES: dict[str, tuple[str, str]] = {
    "metric-loop": ("metric-loop", "ran longer than its time limit"),
    "metric-exit": ("metric-exit", "SystemExit: 3"),
    "metric-interrupt": ("metric-interrupt", "KeyboardInterrupt"),
    "metric-memory": ("metric-memory", "used more than its memory limit"),
    "metric-nan": ("metric-nan", "not a finite number"),
}
CASES.update(METRIC_CASES)
#: The metric's registered name (the program's `metric`), and its `module:function` (`decomp eval`).
METRIC_NAME, METRIC_FUNCTION = "soak_score", "soak_metrics:score"
#: MiB the metric may add to its worker per row (`--metric-memory`).
METRIC_MEMORY_MB = 256
ORDINARY = "ordinary"

PLUGIN = '''
import asyncio, time
from decomp import Handler, Options, handler_kind

class KindOptions(Options):
    timeout: float | None = None

@handler_kind("soaked")
class Soaked(Handler):
    Options = KindOptions
    async def run(self, call):
        q = call.query
        if q == "kind-sleep":
            time.sleep(120)
        elif q == "kind-await":
            await asyncio.Event().wait()
        elif q == "kind-exit":
            raise SystemExit(0)
        elif q == "kind-interrupt":
            raise KeyboardInterrupt
        return q
'''

HELPERS = '''
import time

def act(query):
    if query == "python-sleep":
        time.sleep(120)
    elif query == "python-spin":
        while True:
            pass
    elif query == "python-exit":
        raise SystemExit(3)
    elif query == "python-memory":
        blocks = []
        while True:
            blocks.append(bytearray(64 * 2**20))
    elif query == "huge-answer":
        return "x" * (40 * 2**20)
    return query
'''

POOL_HELPERS = '''
import json, os, resource, stat, struct, threading, time

def _forged(answer):
    frame = json.dumps({"result": {"answer": answer}}).encode()
    return struct.pack("!i", len(frame)) + frame

def _write_all(data, sockets_only):
    for fd in range(3, 40):
        try:
            if not sockets_only or stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, data)
        except OSError:
            pass

def act(query):
    if query == "pool-shift":
        def forge():
            while True:
                time.sleep(0.02)
                _write_all(_forged(query), True)
        threading.Thread(target=forge, daemon=True).start()
    elif query == "pool-scribble":
        _write_all(b"garbage\\n" * 4, False)
    elif query == "pool-escape":
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        for wanted in ((hard, hard), (resource.RLIM_INFINITY, resource.RLIM_INFINITY)):
            try:
                resource.setrlimit(resource.RLIMIT_DATA, wanted)
            except (ValueError, OSError):
                pass
        return len(bytearray(3 * 2**29))
    return query
'''

METRICS = '''
import time
from decomp import hookimpl

def score(prediction, gold):
    case = gold[0]
    if case == "metric-loop":
        while True:
            pass
    elif case == "metric-exit":
        raise SystemExit(3)
    elif case == "metric-interrupt":
        raise KeyboardInterrupt
    elif case == "metric-memory":
        blocks = []
        while True:
            blocks.append(bytearray(64 * 2**20))
    elif case == "metric-nan":
        return float("nan")
    return float(prediction == case)

@hookimpl
def register_metrics(register):
    register("soak_score", score)
'''

BOMB = '''{% set s = namespace(v="x") %}{% if query.startswith("bomb ") %}{% for i in range(query[5:]|int) %}{% set s.v = [s.v, s.v]|string %}{% endfor %}{% endif %}
{{ query }}'''

PROGRAM = '''
model default = "openai:flaky" (base_url="{flaky}")

handler k = soaked(timeout={limit})
handler f = python(function="helpers:act", timeout={limit}, memory=256)
handler t = prompt(file="bomb.j2", template=true, timeout={limit})
handler s = prompt(text="{{{{ query }}}}", template=true)
handler w = python(function="pool_helpers:act", timeout={limit}, memory=256)
metric soak_score

program p(question) {{
    QS: [k] #question
    QS: [f] #question
    QS: [t] #question
    QS: [s] #question
    QS: [w] #question
}}
main p
'''


# ---- a server that misbehaves on its case
class FlakyServer:
    """An OpenAI-compatible completions endpoint on 127.0.0.1 that answers the prompt's last line,
    except for the server cases: trickle one byte every 0.5 s of a 100,000-byte body, send its
    headers then hang, or close the connection mid-body."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=self._main, daemon=True)

    def __enter__(self) -> "FlakyServer":
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _shutdown(self) -> None:
        """Every connection still served (trickling, hanging) ended."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        self.loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = json.loads(await reader.readexactly(length))
                prompt = body.get("prompt") or ""
                prompt = prompt[0] if isinstance(prompt, list) else prompt
                text = prompt.strip().splitlines()[-1] if prompt.strip() else ""
                if not await self._answer(text, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        except asyncio.CancelledError:  # the server shutting down: the connection just ends
            pass
        finally:
            writer.close()

    async def _answer(self, text: str, writer: asyncio.StreamWriter) -> bool:
        if text == "server-trickle":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n")
            for _ in range(1000):
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.5)
            return False
        if text == "server-hang":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(3600)
            return False
        reply = json.dumps({"id": "x", "object": "text_completion", "model": "flaky",
                            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        if text == "server-close":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                         % len(reply) + reply[:10])
            await writer.drain()
            return False
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                     % len(reply) + reply)
        await writer.drain()
        return True


def _project(folder: Path, limit: float, flaky: str, rows: int) -> list[str]:
    (folder / "soaked.py").write_text(PLUGIN)
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "pool_helpers.py").write_text(POOL_HELPERS)
    (folder / "soak_metrics.py").write_text(METRICS)
    (folder / "bomb.j2").write_text(BOMB)
    (folder / "soak.decomp").write_text(PROGRAM.format(flaky=flaky, limit=limit))
    names = list(CASES)
    cases = [names[i % len(names)] for i in range(rows)]
    with (folder / "rows.jsonl").open("w") as out:
        for i, case in enumerate(cases):
            question = CASES[case][0] if case != ORDINARY else f"plain question {i}"
            out.write(json.dumps({"id": str(i), "question": question, "answer": question}) + "\n")
    return cases


def _judge(case: str, i: int, result: dict | None) -> str:
    """right, wrong, crash or hang."""
    if result is None:
        return "hang"
    error = result.get("error") or ""
    if "internal error" in error:
        return "crash"
    if not error and result.get("score") != 1.0:  # answered, so scored: its gold is its answer
        return "wrong"
    if case in METRIC_CASES:
        return _judge_metric(case, result)
    if case in POOL_CASES:
        return _judge_pool(case, result)
    words = CASES[case][1]
    if case == ORDINARY:
        return "right" if result.get("answer") == f"plain question {i}" and not error else "wrong"
    if case == "server-close":  # a body cut short: retried per policy, then the row's error
        return "right" if error and ("closed" in error or "cut short" in error or "incomplete" in error.lower()
                                     or "connection" in error.lower()) else "wrong"
    return "right" if words and any(w in error for w in words.split("|")) else "wrong"


def _judge_pool(case: str, result: dict) -> str:
    """A worker-pool row: right when it answered its own question or ended in its case's words."""
    question, words = POOL_CASES[case]
    if not result.get("error"):
        return "right" if result.get("answer") == question else "wrong"
    return "right" if words in result["error"] else "wrong"


def _judge_metric(case: str, result: dict) -> str:
    """A metric row: right when it ended in its metric's own words, its answer kept, scored 0."""
    question, words = METRIC_CASES[case]
    error = result.get("error") or ""
    said = error.startswith(f"metric {METRIC_NAME!r}") and words in error
    return "right" if said and result.get("answer") == question and result.get("score") == 0.0 else "wrong"


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=len(CASES) * 8)
    p.add_argument("--limit", type=float, default=1.5, help="the handlers' time limit (seconds)")
    p.add_argument("--wall", type=float, default=600, help="seconds after which the run is killed")
    p.add_argument("--metric-timeout", type=float, default=1.0, help="the metric's time limit per row (seconds)")
    p.add_argument("--max-vm", type=float, default=8, help="GiB of address space the run may take (a safety net)")
    p.add_argument("--keep", type=Path, help="keep the project and run directory here")
    args = p.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="decomp-soak-"))
    try:
        with FlakyServer() as flaky:
            cases = _project(folder, args.limit, flaky.base_url, args.rows)
            record = _run(folder, cases, args)
            record["metric_timeout_s"] = args.metric_timeout
            record["eval"] = _eval(folder, cases, args)
    finally:
        if args.keep:
            shutil.copytree(folder, args.keep, dirs_exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)
    return emit(record)


def _cap(gib: float) -> None:
    """In the child: its address space capped, so that a containment that fails cannot take the
    machine down with it (it shows as wrong rows or a crash instead)."""
    limit = int(gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _run(folder: Path, cases: list[str], args) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    command = [sys.executable, "-m", "decomp.runtime.cli", "run", "soak.decomp", "--input", "rows.jsonl",
               "--plugin", "soaked.py", "--run-dir", "out", "--cache", "off", "--attempt-deadline", "3",
               "--call-deadline", "8", "--concurrency", "16", "--plugin", "soak_metrics.py",
               "--metric-timeout", str(args.metric_timeout), "--metric-memory", str(METRIC_MEMORY_MB)]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=args.wall,
                              preexec_fn=lambda: _cap(args.max_vm))
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as killed:
        code, stderr = None, (killed.stderr or b"").decode(errors="replace") if isinstance(killed.stderr, bytes) \
            else (killed.stderr or "")
    wall = time.monotonic() - started
    results = {}
    path = folder / "out" / "results.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            results[row["id"]] = row
    verdicts = [_judge(case, i, results.get(str(i))) for i, case in enumerate(cases)]
    by_case: dict[str, dict[str, int]] = {}
    for case, verdict in zip(cases, verdicts):
        by_case.setdefault(case, {}).setdefault(verdict, 0)
        by_case[case][verdict] += 1
    if "Traceback" in stderr:
        sys.stderr.write(stderr[-4000:])
    wrong = [(i, case, results.get(str(i), {}).get("error")) for i, (case, v) in enumerate(zip(cases, verdicts))
             if v == "wrong"]
    for i, case, error in wrong[:10]:
        sys.stderr.write(f"wrong: row {i} ({case}): {error}\n")
    return {"benchmark": "soak", "rows": len(cases), "right": verdicts.count("right"), "wrong": len(wrong),
            "crashes": verdicts.count("crash") + (1 if "Traceback" in stderr else 0), "hangs": verdicts.count("hang"),
            "exit_code": code, "wall_s": round(wall, 1), "wrong_rows": wrong[:10],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "cases": by_case}


def _eval(folder: Path, cases: list[str], args) -> dict:
    """`decomp eval` of the run with the metric named `module:function`: each metric case's row
    warned about in its words, every other row scored (a row the run answered: 1.0)."""
    command = [sys.executable, "-m", "decomp.runtime.cli", "eval", "--gold", "rows.jsonl", "--pred", "out",
               "--metric", METRIC_FUNCTION, "--metric-timeout", str(args.metric_timeout),
               "--metric-memory", str(METRIC_MEMORY_MB)]
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=args.wall,
                              preexec_fn=lambda: _cap(args.max_vm))
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        code, stdout, stderr = None, "", ""
    wall = time.monotonic() - started
    summary = json.loads(stdout.splitlines()[-1]) if code == 0 and stdout.strip() else {}
    if "Traceback" in stderr:
        sys.stderr.write(stderr[-4000:])
    answered = _answered(folder / "out" / "results.jsonl")
    return {"exit_code": code, "metric_errors": summary.get("metric_errors", 0),
            "expected_metric_errors": sum(case in METRIC_CASES for case in cases),
            "score": summary.get("score"), "expected_score": answered / len(cases) if cases else 0.0,
            "wrong_warnings": _wrong_warnings(cases, stderr),
            "crashes": 1 if "Traceback" in stderr or "internal error" in stderr else 0, "wall_s": round(wall, 1)}


def _wrong_warnings(cases: list[str], stderr: str) -> int:
    """Metric cases' rows `decomp eval` did not warn about in their words, and rows it warned
    about that are no metric case's."""
    warned = {line.split(":", 2)[1].strip().removeprefix("row "): line for line in stderr.splitlines()
              if line.startswith("warning: row ")}
    expected = {str(i): case for i, case in enumerate(cases) if case in METRIC_CASES}
    missed = [row for row, case in expected.items() if not _warned_right(case, warned.get(row))]
    return len(missed) + len(set(warned) - set(expected))


def _warned_right(case: str, warning: str | None) -> bool:
    """Whether `decomp eval`'s warning about a metric case's row names the metric and its words."""
    return warning is not None and f"metric {METRIC_FUNCTION!r}" in warning and METRIC_CASES[case][1] in warning


def _answered(path: Path) -> int:
    """The rows of the run that answered (no error)."""
    if not path.exists():
        return 0
    return sum(not json.loads(line).get("error") for line in path.read_text().splitlines() if line.strip())


if __name__ == "__main__":
    main()

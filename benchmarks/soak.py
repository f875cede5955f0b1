"""Soak: one batch run whose rows mix every hostile case of issue 29 with ordinary rows; every
row must end, the hostile ones with their own worded error, the others answered.

    python benchmarks/soak.py [--rows 120] [--limit 1.5] [--wall 600] [--keep DIR]

The run is the real command (`decomp run FILE --input rows.jsonl`, in a subprocess) on a
program of four steps, each given the row's question, each of which answers an ordinary one
with itself (the prompts through the server below, which answers a prompt's last line):

  [k]  a `--plugin` kind that, on its case, blocks its thread (`time.sleep`), awaits forever,
       raises SystemExit or KeyboardInterrupt;
  [f]  a Python function that sleeps, spins, exits, allocates far past its memory limit, or
       answers 40 MiB of text;
  [t]  a prompt whose Jinja template doubles a value through `|string` as often as the
       question says (the probe's bomb);
  [s]  a prompt whose model is a server that misbehaves on its case (trickles its body one
       byte at a time, sends its headers then hangs, closes mid-body), within the attempt and call
       deadlines (`--attempt-deadline 3 --call-deadline 8`).

Row i gets case `CASES[i % len(CASES)]`. A row is *right* when an ordinary one answers its own
question and a hostile one ends with its case's words; a *crash* is a row error that is an
internal error, or a traceback on stderr; a *hang* is a row with no result line when the run
ended (the run is killed after `--wall` seconds). Prints one JSON line: {"benchmark": "soak",
"rows", "right", "wrong", "crashes", "hangs", "exit_code", "wall_s", "wrong_rows" (the first
ten: index, case, error), "peak_rss_mb", "cases"}.
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

BOMB = '''{% set s = namespace(v="x") %}{% if query.startswith("bomb ") %}{% for i in range(query[5:]|int) %}{% set s.v = [s.v, s.v]|string %}{% endfor %}{% endif %}
{{ query }}'''

PROGRAM = '''
model default = "openai:flaky" (base_url="{flaky}")

handler k = soaked(timeout={limit})
handler f = python(function="helpers:act", timeout={limit}, memory=256)
handler t = prompt(file="bomb.j2", template=true, timeout={limit})
handler s = prompt(text="{{{{ query }}}}", template=true)

program p(question) {{
    QS: [k] #question
    QS: [f] #question
    QS: [t] #question
    QS: [s] #question
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
    (folder / "bomb.j2").write_text(BOMB)
    (folder / "soak.decomp").write_text(PROGRAM.format(flaky=flaky, limit=limit))
    names = list(CASES)
    cases = [names[i % len(names)] for i in range(rows)]
    with (folder / "rows.jsonl").open("w") as out:
        for i, case in enumerate(cases):
            question = CASES[case][0] if case != ORDINARY else f"plain question {i}"
            out.write(json.dumps({"id": str(i), "question": question}) + "\n")
    return cases


def _judge(case: str, i: int, result: dict | None) -> str:
    """right, wrong, crash or hang."""
    if result is None:
        return "hang"
    error = result.get("error") or ""
    if "internal error" in error:
        return "crash"
    words = CASES[case][1]
    if case == ORDINARY:
        return "right" if result.get("answer") == f"plain question {i}" and not error else "wrong"
    if case == "server-close":  # a body cut short: retried per policy, then the row's error
        return "right" if error and ("closed" in error or "cut short" in error or "incomplete" in error.lower()
                                     or "connection" in error.lower()) else "wrong"
    return "right" if words and any(w in error for w in words.split("|")) else "wrong"


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=len(CASES) * 8)
    p.add_argument("--limit", type=float, default=1.5, help="the handlers' time limit (seconds)")
    p.add_argument("--wall", type=float, default=600, help="seconds after which the run is killed")
    p.add_argument("--max-vm", type=float, default=8, help="GiB of address space the run may take (a safety net)")
    p.add_argument("--keep", type=Path, help="keep the project and run directory here")
    args = p.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="decomp-soak-"))
    try:
        with FlakyServer() as flaky:
            cases = _project(folder, args.limit, flaky.base_url, args.rows)
            record = _run(folder, cases, args)
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
               "--call-deadline", "8", "--concurrency", "16"]
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


if __name__ == "__main__":
    main()

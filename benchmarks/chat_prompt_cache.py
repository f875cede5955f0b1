"""Benchmark: the share of prompt tokens a provider's prompt cache serves for a DecomP run on a
chat model, with prompts sent as conversations (issue 43) and as one user message.

Runs the letter_cat decomposer of `programs/decomp/letter_cat.decomp` (its Python handlers
answer the sub-questions) on ROWS letter-concatenation questions, showing it ALL the examples of
`prompts/letter_cat_decomp.txt` (no `nearest=`: the examples are the same in every request, a
stable prefix). The variant program is written to a temporary folder, pointing at the bundled
prompt file and functions. Two layouts, each against a fresh mock server (its cache cannot be
emptied) in this process, chat API only (`apis=("chat",)`), with its OpenAI-like prefix cache on:

    conversation   the openai model's default: the examples as user/assistant turns, then the
                   question and the steps so far as turns (decomp.handlers.conversation)
    one_message    `conversation=false`: the whole prompt text as one user message

The server's responder answers like a good model, in both layouts: the next `QS:` line for the
question given the steps so far (split, foreach str_position, merge with the separator asked,
then [EOQ]). One message's text goes to benchmarks/letter_cat_oracle.py's `respond` as it is;
a conversation's last question and the turns after it are written back as that transcript
first (`transcript`), so both layouts get the same answers.

The cache works on the mock's whitespace tokens, so OpenAI's thresholds (a prefix of 1,024
tokens at least, counted in blocks of 128) are scaled by how many BPE tokens a whitespace token
of this prompt file is: 1,203 tokens of Gemma 3's tokenizer for its 597 whitespace tokens,
about 2.0; hence 512 and 64 by default (--cache-min-tokens, --cache-block). No step cache,
one row and one request at a time (`run_rows` window 1, concurrency 1), so requests come in
the same order in both layouts. Every row's answer is checked against the right one.

Prints one JSON line: per layout the rows answered correctly, the server's `prompt_tokens` and
`cached_tokens` and their quotient `cached_share`, the same counts as decomp's own usage saw
them (`usage_*`), the requests and the mean messages per request; `share_ratio` = conversation
share / one-message share; and the parameters.

    python benchmarks/chat_prompt_cache.py [--rows 50] [--words 3] [--cache-min-tokens 512] [--cache-block 64]
"""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import dataset_rows, make_rows, records_in_order, respond  # noqa: E402

NAME = "chat_prompt_cache"
PROMPT = REPO / "programs" / "decomp" / "prompts" / "letter_cat_decomp.txt"
LAYOUTS = {"conversation": True, "one_message": False}
#: OpenAI's prompt cache, in BPE tokens, and BPE tokens per whitespace token of PROMPT (Gemma 3's
#: tokenizer: 1,203 for 597): what the defaults are scaled by.
OPENAI_BPE = {"cache_min_tokens": 1024, "cache_block": 128}
BPE_PER_WHITESPACE_TOKEN = 2.0
PROGRAM = """\
# letter_cat.decomp's decomposer shown every example (no nearest=): a stable prefix in every request
handler split        = python(function="decomp.programs.decomp.letters:words", returns=list[str])
handler str_position = python(function="decomp.programs.decomp.letters:letter", returns=str)
handler merge        = python(function="decomp.programs.decomp.letters:concatenate", returns=str)
handler letter_cat   = decomposer(file={file}, max_steps=6, max_tokens=64, returns=str)

main letter_cat
"""
_QUESTION = re.compile(r"Take the (?:letters at position \d+|last letters) of the words in .*")


# ---------------------------------------------------------------- the model
def transcript(messages: list) -> str:
    """A decomposer conversation's last question and the turns after it, as the `QC:`/`QS:`/`A:`
    text a completion model would have been given (ending in `QS:`); "" without a question."""
    turns = [m for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str)]
    start = next((i for i in range(len(turns) - 1, -1, -1)
                  if turns[i].get("role") == "user" and _QUESTION.fullmatch(turns[i]["content"])), None)
    if start is None:
        return ""
    lines = [f"QC: {turns[start]['content']}"]
    for turn in turns[start + 1:]:
        lines.append(f"{'QS' if turn['role'] == 'assistant' else 'A'}: {turn['content']}")
    return "\n".join(lines) + "\nQS:"


def responder(prompt: str, request_json: dict) -> str:
    """A good model for the decomposer in either layout: one user message is the prompt text
    (ending in `QS:`); a conversation is read back as its transcript first."""
    messages = request_json.get("messages") or []
    text = prompt if len(messages) == 1 else transcript(messages)
    return respond(text, request_json)


# ---------------------------------------------------------------- one layout
def write_program(folder: Path) -> Path:
    """The variant program in `folder`, reading the bundled prompt file by its absolute path."""
    path = folder / "letter_cat_all_examples.decomp"
    path.write_text(PROGRAM.format(file=json.dumps(str(PROMPT))), encoding="utf-8")
    return path


def run_layout(program: Path, rows: list[dict], conversation: bool, args) -> dict:
    """`rows` through the program against a fresh caching server: the layout's entry."""
    import asyncio
    import io

    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.runs.batch import run_rows
    from decomp.runtime.testing.mock_server import MockOpenAIServer

    with MockOpenAIServer(responder=responder, apis=("chat",), prompt_cache=True, record=20 * len(rows) + 100,
                          cache_min_tokens=args.cache_min_tokens, cache_block=args.cache_block) as server:
        settings = ModelSettings(base_url=server.base_url, api="chat", options=(("conversation", conversation),))
        session = Session(model="openai:oracle", settings=settings, scheduler=Scheduler(1), cache=None)
        out = io.StringIO()
        summary = asyncio.run(run_rows(session, session.load(program), dataset_rows(rows), out, window=1))
        stats, sent = server.stats(), server.requests
    return tally(records_in_order(out.getvalue()), rows, stats, sent, summary.usage)


def tally(records: list[dict], rows: list[dict], stats: dict, sent: list[dict], usage) -> dict:
    """A layout's entry: rows right, the server's token counts and decomp's own."""
    gold = {row["id"]: row["answer"] for row in rows}
    right = sum(1 for r in records if "error" not in r and r.get("answer") == gold.get(r["id"]))
    messages = sum(len(body.get("messages") or []) for body in sent)
    return {"correct": right, "failed": len(rows) - right, "requests": stats["requests"],
            "prompt_tokens": stats["prompt_tokens"], "cached_tokens": stats["cached_tokens"],
            "cached_share": _share(stats["cached_tokens"], stats["prompt_tokens"]),
            "usage_prompt_tokens": usage.prompt_tokens, "usage_cached_tokens": usage.cached_tokens,
            "messages_per_request": round(messages / len(sent), 2) if sent else 0}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# ---------------------------------------------------------------- the run
def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=50, server=False)
    p.set_defaults(words=3)  # three-word names, as in the DecomP dataset's n3 rows
    p.add_argument("--cache-min-tokens", type=int, default=512, help="shortest cached prefix, whitespace tokens")
    p.add_argument("--cache-block", type=int, default=64, help="cached tokens are a multiple of this")
    args = p.parse_args(argv)
    if args.rows < 1 or args.words < 1 or args.cache_block < 1 or args.cache_min_tokens < 0:
        p.error("--rows, --words and --cache-block must be at least 1, --cache-min-tokens at least 0")
    rows = make_rows(args.rows, args.words, args.seed)
    with tempfile.TemporaryDirectory(prefix="decomp-chat-cache-") as tmp:
        program = write_program(Path(tmp))
        layouts = {name: run_layout(program, rows, conversation, args) for name, conversation in LAYOUTS.items()}
    return emit(summary(args, layouts))


def summary(args, layouts: dict) -> dict:
    """The one JSON line: the layouts' entries, their shares' ratio and the parameters."""
    shares = [layouts[name]["cached_share"] for name in LAYOUTS]
    return {"benchmark": NAME, "rows": args.rows, "words": args.words, "seed": args.seed,
            "correct": {name: entry["correct"] for name, entry in layouts.items()}, **layouts,
            "share_ratio": round(shares[0] / shares[1], 3) if shares[1] else None,
            "cache_min_tokens": args.cache_min_tokens, "cache_block": args.cache_block,
            "tokenizer": "whitespace (the mock's)", "openai_bpe": OPENAI_BPE,
            "bpe_per_whitespace_token": BPE_PER_WHITESPACE_TOKEN, "concurrency": 1, "step_cache": False,
            "examples": "all 10 (no nearest=)"}


if __name__ == "__main__":
    main()

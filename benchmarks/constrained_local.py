"""Benchmark: constrained decoding on the embedded local model (Gemma 3 270M), free against constrained.

Two workloads of generated few-shot prompts, greedy, cut at a newline, as the bundled programs
ask: `--rows` prompts asking for the words of a phrase (a list of strings: the JSON Schema that
`list[str]` compiles to) and `--rows` asking a yes/no question about two numbers (bare `yes` or
`no`: the regex `yes|no` that `one_of("yes", "no")` compiles to). Each prompt is answered freely
and constrained (llguidance through the logits processor) one after the other on the same
model, so both see the same load, after an unmeasured one-token call that leaves the prompt
held (prefix reuse): both measured calls then pay for their decoding alone, which is what a
constraint changes. The pair is asked `--repeats` times, and each call's time is its fastest
(greedy answers repeat exactly; on a shared machine the fastest is the least disturbed). A
warm-up call of each kind comes first and is not measured (the constrained one builds
llguidance's tokenizer: `first_constrained_call_s`). With `--llama N`, the first N list
prompts are also answered (once) under llama-cpp-python's own grammar (the `constrain="llama"`
mode, a model of its own; it has no converter for the yes/no regex).

    python benchmarks/constrained_local.py [--rows 20] [--shots 2] [--repeats 3] [--max-tokens 64] [--llama 0]
                                           [--seed 0]

`--shots 0` asks without examples: free answers then seldom fit, and `valid` shows what the
constraint adds (it does not say whether the answers are right).

One JSON line: per workload (`list`, `yes_no`) and way (`free`, `constrained`, `llama`):
s_per_call, tokens_per_s (the answer text's tokens: the same for the same text), valid
(the share of answers that fit: the stripped text is JSON of the schema, or matches the regex),
stopped (the share that ended before max_tokens); per workload `ratio` (constrained / free
seconds), `free_fits` (how many free answers fit), `same_when_free_fits` (the share of those
whose constrained answer is the same text), and at the top `ratio` over both workloads,
`first_constrained_call_s`, `compilations` and `threads`.
"""
from __future__ import annotations

import json
import os
import random
import re
import time

if __package__ in (None, ""):  # `python benchmarks/constrained_local.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import emit, parser  # noqa: E402

WORDS = ("river", "stone", "green", "apple", "quiet", "north", "paper", "light", "Maria", "Lopez", "silver",
         "garden", "window", "Oslo", "Cairo", "orange", "little", "market", "winter", "Ada", "Turing", "bright")
LIST_SHOTS = ('Q: What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\n\n',
              'Q: What are the words in "the old red barn"?\nA: ["the", "old", "red", "barn"]\n\n')
YES_NO_SHOTS = ("Q: Is 12 greater than 5?\nA: yes\n\n", "Q: Is 3 greater than 8?\nA: no\n\n")
STRINGS = {"type": "array", "items": {"type": "string"}}
YES_NO = "yes|no"


def workloads(rows: int, seed: int, shots: int = 2) -> dict[str, list[str]]:
    """The prompts of each workload after `shots` examples, the same for the same seed."""
    rng = random.Random(seed)
    phrases = [" ".join(rng.sample(WORDS, rng.randint(2, 5))) for _ in range(rows)]
    pairs = [(rng.randint(1, 99), rng.randint(1, 99)) for _ in range(rows)]
    lists, yes_no = "".join(LIST_SHOTS[:shots]), "".join(YES_NO_SHOTS[:shots])
    return {"list": [f'{lists}Q: What are the words in "{p}"?\nA:' for p in phrases],
            "yes_no": [f"{yes_no}Q: Is {a} greater than {b}?\nA:" for a, b in pairs]}


def constraints() -> dict:
    """The constraint of each workload."""
    from decomp.runtime.models.base import Constraint

    return {"list": Constraint(schema=json.dumps(STRINGS)), "yes_no": Constraint(regex=YES_NO)}


def valid(kind: str, text: str) -> bool:
    """Whether an answer fits its workload's type, read as the engine reads it (stripped)."""
    if kind == "yes_no":
        return re.fullmatch(YES_NO, text.strip()) is not None
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def answer(model, prompt: str, constraint, max_tokens: int) -> dict:
    """One greedy call: its text, the text's tokens, finish reason and seconds."""
    from decomp.runtime.models.base import Request

    request = Request(prompt, max_tokens=max_tokens, stop=("\n",), constraint=constraint)
    start = time.perf_counter()
    out = model._complete(request)  # the model's own thread is not needed: one call at a time
    seconds = time.perf_counter() - start
    tokens = len(model._llm.tokenize(out.text.encode("utf-8"), add_bos=False)) if out.text else 0
    return {"text": out.text, "tokens": tokens, "reason": out.finish_reasons[0], "s": seconds}


def summary(kind: str, calls: list[dict]) -> dict:
    """The figures of one way over one workload."""
    seconds = sum(c["s"] for c in calls)
    return {"s_per_call": round(seconds / len(calls), 4),
            "tokens_per_s": round(sum(c["tokens"] for c in calls) / seconds, 2),
            "valid": round(sum(valid(kind, c["text"]) for c in calls) / len(calls), 3),
            "stopped": round(sum(c["reason"] == "stop" for c in calls) / len(calls), 3)}


def fastest(calls: list[dict]) -> dict:
    """The first of repeated calls, with the fastest one's seconds."""
    return {**calls[0], "s": min(c["s"] for c in calls)}


def run_workload(kind: str, prompts: list[str], model, llama, constraint, args) -> dict:
    """Free, constrained (and llama-grammar) answers to every prompt, side by side."""
    free, guided, by_llama = [], [], []
    for index, prompt in enumerate(prompts):
        answer(model, prompt, None, 1)  # the prompt held: the calls below decode only
        pairs = [(answer(model, prompt, None, args.max_tokens), answer(model, prompt, constraint, args.max_tokens))
                 for _ in range(args.repeats)]
        free.append(fastest([f for f, _ in pairs]))
        guided.append(fastest([g for _, g in pairs]))
        if llama is not None and index < args.llama and kind == "list":
            answer(llama, prompt, None, 1)
            by_llama.append(answer(llama, prompt, constraint, args.max_tokens))
    fitting = [(f, g) for f, g in zip(free, guided) if valid(kind, f["text"])]
    record = {"free": summary(kind, free), "constrained": summary(kind, guided),
              "ratio": round(sum(g["s"] for g in guided) / sum(f["s"] for f in free), 3),
              "free_fits": len(fitting),
              "same_when_free_fits": round(sum(f["text"] == g["text"] for f, g in fitting) / max(1, len(fitting)), 3),
              "examples": {"free": free[0]["text"], "constrained": guided[0]["text"]}}
    if by_llama:
        record["llama"] = summary(kind, by_llama)
        record["llama"]["example"] = by_llama[0]["text"]
    record["seconds"] = {"free": sum(f["s"] for f in free), "constrained": sum(g["s"] for g in guided)}
    return record


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--shots", type=int, choices=(0, 1, 2), default=2, help="examples before each question")
    p.add_argument("--repeats", type=int, default=3, help="times each prompt is asked each way (the fastest counts)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--llama", type=int, default=0, help="list prompts also run under llama-cpp-python's own "
                   "grammar (slow: about 4x)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.models.local import DEFAULT, LocalModel

    model = LocalModel(DEFAULT, ModelSettings())
    llama = LocalModel(DEFAULT, ModelSettings(options=(("constrain", "llama"),))) if args.llama else None
    prompts, ways = workloads(args.rows + 1, args.seed, args.shots), constraints()
    record = {"benchmark": "constrained_local", "rows": args.rows, "shots": args.shots, "repeats": args.repeats,
              "threads": model.threads,
              "max_tokens": args.max_tokens, "load_before": round(os.getloadavg()[0], 2)}
    answer(model, prompts["list"][0], None, args.max_tokens)  # warm-up: loads the weights
    record["first_constrained_call_s"] = round(answer(model, prompts["list"][0], ways["list"], args.max_tokens)["s"], 3)
    for kind in ("list", "yes_no"):
        record[kind] = run_workload(kind, prompts[kind][1:], model, llama, ways[kind], args)
    seconds = [record[kind].pop("seconds") for kind in ("list", "yes_no")]
    record["ratio"] = round(sum(s["constrained"] for s in seconds) / sum(s["free"] for s in seconds), 3)
    record["compilations"] = model.guide.compilations
    record["load_after"] = round(os.getloadavg()[0], 2)
    return emit(record)


if __name__ == "__main__":
    main()

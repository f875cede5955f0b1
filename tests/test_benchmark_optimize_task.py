"""The task and the test model of the `decomp optimize` benchmark (benchmarks/optimize_task.py),
and benchmarks/optimize/wordops.decomp scored on it: the student gets the two operations its
prompt shows, the teacher everything."""
import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.optimize_task import (KINDS, OPS, SUB_QUESTION, WORDS, balanced, demo_kinds, expected, kind_of,
                                      make_rows, make_splits, respond, row_question, sub_question, sub_questions,
                                      write_splits)

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "benchmarks" / "optimize" / "wordops.decomp"
SHOWN = ("reversed", "doubled")  # the operations prompts/op.txt shows


def _wordops():
    spec = importlib.util.spec_from_file_location("wordops_under_test", PROGRAM.with_suffix(".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- operations and rows
def test_the_operations():
    assert len(OPS) == 8 and KINDS == tuple(OPS)
    got = {k: op("garden") for k, op in OPS.items()}
    assert got == {"reversed": "nedrag", "doubled": "gardengarden", "first letter": "g", "last letter": "n",
                   "length": "6", "sorted letters": "adegnr", "consonants": "grdn", "vowels": "ae"}


def test_every_operation_changes_every_word():
    """A student that answers the word unchanged is wrong on every sub-question (and no
    operation is a change of case, which decomp's em would not see)."""
    assert len(WORDS) == len(set(WORDS)) == 60
    for word in WORDS:
        assert word.isalpha() and word.islower()
        for kind, op in OPS.items():
            assert op(word) != word and op(word).lower() != word, (kind, word)


def test_decomp_em_sees_every_wrong_answer():
    """decomp's em normalises (case, punctuation, articles, numbers): it still tells the
    student's unchanged words from every right answer, as DSPy's exact match does."""
    from decomp.runtime.scoring.metrics import em

    for row in make_splits(seed=0)["test"]:
        words = row["question"].split('"')[3]
        assert em(words, row["answer"]) == 0.0 and em(row["answer"], row["answer"]) == 1.0
    for word in WORDS:
        assert all(em(word, op(word)) == 0.0 for op in OPS.values()), word


def test_questions_and_answers():
    q = row_question("sorted letters", ["house", "river", "table"])
    assert q == 'Apply "sorted letters" to each word of "house river table" and join the results with spaces.'
    assert expected(q) == "ehosu eirrv abelt" and kind_of(q) == "sorted letters"
    assert sub_questions(q) == [sub_question("sorted letters", w) for w in ("house", "river", "table")]
    assert sub_question("length", "apple") == 'What is the length of "apple"?'
    assert SUB_QUESTION.fullmatch(sub_question("first letter", "apple")).groups() == ("first letter", "apple")
    with pytest.raises(ValueError):
        expected('Apply "shouted" to each word of "a b c" and join the results with spaces.')


def test_wordops_helpers_split_and_join_as_the_task_does():
    wordops = _wordops()
    q = row_question("consonants", ["cloud", "stone", "grape"])
    assert wordops.subquestions(q) == sub_questions(q)
    assert wordops.join([["cld", "stn", "grp"]]) == "cld stn grp" == expected(q)


def test_make_rows():
    rows = make_rows({"length": 2, "vowels": 3}, seed=4)
    assert [r["id"] for r in rows] == [f"row{i}" for i in range(5)]
    assert sorted(kind_of(r["question"]) for r in rows) == ["length"] * 2 + ["vowels"] * 3
    assert all(r["answer"] == expected(r["question"]) and set(r) == {"id", "question", "answer"} for r in rows)
    assert all(len(set(r["question"].split('"')[3].split())) == 3 for r in rows)  # 3 distinct words
    assert make_rows({"length": 2, "vowels": 3}, seed=4) == rows and make_rows(5, seed=5) != rows
    assert sorted(kind_of(r["question"]) for r in make_rows(8)) == sorted(KINDS)
    assert balanced(10) == {k: 2 if i < 2 else 1 for i, k in enumerate(KINDS)}
    with pytest.raises(ValueError, match="unknown kinds"):
        make_rows({"shouted": 1})


def test_splits_are_balanced_and_disjoint(tmp_path):
    splits = make_splits(seed=0)
    for name, per_kind in (("train", 4), ("dev", 2), ("test", 4)):
        kinds = [kind_of(r["question"]) for r in splits[name]]
        assert {k: kinds.count(k) for k in KINDS} == dict.fromkeys(KINDS, per_kind), name
        assert kinds[:len(KINDS)] != list(KINDS)  # shuffled: the first rows are not one of each in order
    questions = [r["question"] for rows in splits.values() for r in rows]
    assert len(questions) == len(set(questions)) == 80
    ids = [r["id"] for rows in splits.values() for r in rows]
    assert len(set(ids)) == 80 and ids[0] == "train-0"
    assert make_splits(seed=0) == splits and make_splits(seed=1) != splits
    paths = write_splits(tmp_path / "data", train=8, dev=8, test=16, seed=3)
    assert sorted(paths) == ["dev", "test", "train"]
    written = {name: [json.loads(line) for line in path.read_text().splitlines()] for name, path in paths.items()}
    assert written == make_splits(8, 8, 16, seed=3)


# ---------------------------------------------------------------- the test model, completions
def _completion(model: str, question: str, demos: tuple[tuple[str, str], ...] = ()) -> str:
    head = "".join(f"Q: {sub_question(k, w)}\nA: {json.dumps(OPS[k](w))}\n\n" for k, w in demos)
    prompt = f"{head}Q: {question}\nA:"
    return respond(prompt, {"model": model, "prompt": prompt})


def test_completions_teacher_always_right():
    assert _completion("teacher", sub_question("vowels", "lemon")) == ' "eo"'
    assert _completion("teacher", sub_question("length", "lemon"), (("reversed", "cloud"),)) == ' "5"'


def test_completions_student_right_only_with_a_demo_of_the_kind():
    q = sub_question("consonants", "lemon")
    assert _completion("student", q) == ' "lemon"'
    assert _completion("student", q, (("reversed", "cloud"), ("doubled", "tiger"))) == ' "lemon"'
    assert _completion("student", q, (("reversed", "cloud"), ("consonants", "tiger"))) == ' "lmn"'
    # the demonstration of that kind may be of the same word, and may come first or last
    assert _completion("student", q, (("consonants", "lemon"), ("reversed", "cloud"))) == ' "lmn"'


def test_completions_demo_kinds_and_unknown_requests():
    prompt = f'Q: {sub_question("reversed", "cloud")}\nA: "duolc"\n\nQ: {sub_question("length", "x")}\nA:'
    assert demo_kinds({"prompt": prompt}, prompt) == {"reversed"}
    assert respond(prompt, {"model": "someone", "prompt": prompt}) == ""
    assert respond("Q: What is the capital of France?\nA:", {"model": "teacher"}) == ""
    assert respond('Q: What is the shouted of "cloud"?\nA:', {"model": "teacher"}) == ""
    row = row_question("reversed", ["cloud", "stone", "grape"])
    assert respond(f"Q: {row}\nA:", {"model": "teacher"}) == ""


# ---------------------------------------------------------------- the test model, DSPy's ChatAdapter
SYSTEM = ("Your input fields are:\n1. `question` (str):\nYour output fields are:\n1. `answer` (str):\n"
          "All interactions will be structured in the following way, with the appropriate values filled in.\n\n"
          "[[ ## question ## ]]\n{question}\n\n[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]\n"
          "In adhering to this structure, your objective is: \n        Given the fields `question`, produce the "
          "fields `answer`.")
REQUIREMENT = ("Respond with the corresponding output fields, starting with the field `[[ ## answer ## ]]`, "
               "and then ending with the marker for `[[ ## completed ## ]]`.")


def _chat(model: str, question: str, demos: tuple[tuple[str, str], ...] = (), rows: tuple[str, ...] = ()) -> dict:
    """A request as DSPy's ChatAdapter makes it: demos as user/assistant pairs (`rows`: whole rows
    as demos, as LabeledFewShot puts them), the input in the last user message."""
    messages = [{"role": "system", "content": SYSTEM}]
    pairs = [(sub_question(k, w), OPS[k](w)) for k, w in demos] + [(r, expected(r)) for r in rows]
    for q, a in pairs:
        messages.append({"role": "user", "content": f"[[ ## question ## ]]\n{q}"})
        messages.append({"role": "assistant", "content": f"[[ ## answer ## ]]\n{a}\n\n[[ ## completed ## ]]\n"})
    messages.append({"role": "user", "content": f"[[ ## question ## ]]\n{question}\n\n{REQUIREMENT}"})
    return {"model": model, "messages": messages}


def _chat_reply(request: dict) -> str:
    prompt = "\n".join(m["content"] for m in request["messages"])  # what the mock server passes
    return respond(prompt, request)


def test_chat_teacher_always_right():
    assert _chat_reply(_chat("teacher", sub_question("sorted letters", "sugar"))) == \
        "[[ ## answer ## ]]\nagrsu\n\n[[ ## completed ## ]]"


def test_chat_student_right_only_with_a_demo_of_the_kind():
    q = sub_question("last letter", "sugar")
    assert _chat_reply(_chat("student", q)) == "[[ ## answer ## ]]\nsugar\n\n[[ ## completed ## ]]"
    assert _chat_reply(_chat("student", q, (("reversed", "cloud"),))) == \
        "[[ ## answer ## ]]\nsugar\n\n[[ ## completed ## ]]"
    assert _chat_reply(_chat("student", q, (("reversed", "cloud"), ("last letter", "tiger")))) == \
        "[[ ## answer ## ]]\nr\n\n[[ ## completed ## ]]"
    assert demo_kinds(_chat("student", q, (("reversed", "cloud"), ("last letter", "tiger")))) == \
        {"reversed", "last letter"}


def test_chat_whole_rows_as_demos_are_no_demonstrations():
    """LabeledFewShot gives a sub-question predictor whole rows as demos: not sub-questions."""
    q = sub_question("last letter", "sugar")
    rows = (row_question("last letter", ["cloud", "stone", "grape"]),)
    assert demo_kinds(_chat("student", q, rows=rows)) == set()
    assert _chat_reply(_chat("student", q, rows=rows)) == "[[ ## answer ## ]]\nsugar\n\n[[ ## completed ## ]]"


def test_chat_output_field_and_unknown_requests():
    request = _chat("teacher", sub_question("vowels", "sugar"))
    request["messages"][-1]["content"] = request["messages"][-1]["content"].replace("## answer ##", "## result ##")
    assert _chat_reply(request) == "[[ ## result ## ]]\nua\n\n[[ ## completed ## ]]"
    assert _chat_reply(_chat("teacher", "What is the capital of France?")) == ""
    assert _chat_reply(_chat("nobody", sub_question("vowels", "sugar"))) == ""
    assert respond("", {"model": "teacher", "messages": []}) == ""
    # the input is in the last user message, not in a demo before it
    only_demo = _chat("teacher", "Hello", (("vowels", "sugar"),))
    assert _chat_reply(only_demo) == ""


# ---------------------------------------------------------------- wordops.decomp on the test model
@pytest.mark.network
@pytest.mark.parametrize("model, score", [("student", 0.25), ("teacher", 1.0)])
def test_wordops_scores_on_the_test_model(tmp_path, model, score):
    """The student answers the two operations prompts/op.txt shows (2 of 8 kinds), the teacher all."""
    from decomp.runtime.runs.api import RunOptions, run_dataset
    from decomp.runtime.testing.mock_server import MockOpenAIServer

    for kind in SHOWN:
        assert f"What is the {kind} of" in (PROGRAM.parent / "prompts" / "op.txt").read_text()
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in make_rows(16, seed=2)), encoding="utf-8")
    with MockOpenAIServer(responder=respond) as server:
        summary = run_dataset(PROGRAM, data, model=f"openai:{model}", run_dir=tmp_path / "run",
                              options=RunOptions(base_url=server.base_url, cache_dir=tmp_path / "cache"))
        assert server.stats()["requests"] == 16 * 3
    assert summary.failed == 0 and summary.score == score
    records = summary.records()
    assert all(r["answer"] == " ".join(r["answer"].split()) and "[" not in r["answer"] for r in records)  # joined
    if model == "student":
        kinds = {r["id"]: kind_of(r["question"]) for r in make_rows(16, seed=2)}
        assert {kinds[r["id"]] for r in records if r["score"] == 1.0} == set(SHOWN)
    else:
        assert [r["answer"] for r in records] == [r["answer"] for r in make_rows(16, seed=2)]

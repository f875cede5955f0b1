"""The open-domain multi-hop QA programs (programs/odqa/) end to end over a real tantivy index
built from the bundled corpus, on the fake model: the decomposition, the no-decomposition
baseline and the closed-book baseline; and the bundled corpus and questions themselves."""
import json

import pytest
from click.testing import CliRunner

from decomp import FakeModel, Session
from decomp.runtime.runs.api import run_dataset
from decomp.handlers.search.corpus import read_corpus
from decomp.handlers.search.tantivy_index import TantivyIndex, safe_query
from decomp.runtime.cli import PROGRAMS_DIR, main
from decomp.runtime.testing.fake import last_question

ODQA = PROGRAMS_DIR / "odqa"
PROGRAM = ODQA / "odqa.decomp"
CORPUS = ODQA / "corpus.jsonl"
QUESTIONS = ODQA / "questions.jsonl"
ROWS = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    """The bundled corpus indexed with the command the README gives."""
    out = tmp_path_factory.mktemp("odqa") / "odqa-index"
    result = CliRunner().invoke(main, ["index", "build", str(CORPUS), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["documents"] == len(CORPUS.read_text().splitlines())
    return out


def test_the_bundled_corpus_and_questions_agree():
    records = list(read_corpus(CORPUS))
    titles = {r.title for r in records}
    assert 60 <= len(records) <= 150 and len({r.id for r in records}) == len(records)
    assert 10 <= len(ROWS) <= 20
    for row in ROWS:
        assert set(row["supporting"]) <= titles, row["id"]
        assert len(row["hops"]) == len(row["hop_answers"]) == len(row["supporting"]) >= 2
        assert row["hop_answers"][-1] == row["answer"]


def _recall(index, rows, k):
    """Rows whose every supporting paragraph is among the k retrieved: for the whole question,
    and for each gold sub-question in turn."""
    whole = hops = 0
    for row in rows:
        titles = {hit["title"] for hit in index.search(safe_query(row["question"]), k)}
        whole += set(row["supporting"]) <= titles
        hops += all(title in {hit["title"] for hit in index.search(safe_query(q), k)}
                    for q, title in zip(row["hops"], row["supporting"]))
    return whole, hops


def test_sub_questions_retrieve_what_the_whole_question_misses(index_dir):
    index = TantivyIndex(index_dir)
    assert _recall(index, ROWS, 2) == (5, 16)
    assert _recall(index, ROWS, 5) == (14, 16)


def _oracle() -> FakeModel:
    """Decomposes each bundled question into its gold sub-questions; as a reader, answers a
    question with its gold answer only when that answer is written in the retrieved paragraphs of
    the prompt (after the few-shot examples), else "unknown": the score measures what retrieval
    put in front of the reader."""
    gold, script = {}, {}
    for row in ROWS:
        gold[row["question"]] = row["answer"]
        gold.update(zip(row["hops"], row["hop_answers"]))
        refs = ", ".join(f"#{n}" for n in range(1, len(row["hops"]) + 1))
        script[row["question"]] = [f"[retrieve_odqa] {q}" for q in row["hops"]] + [f"[multihop_reader] [{refs}]",
                                                                                  "[EOQ]"]

    def read(request):
        body = request.prompt[: request.prompt.rindex("\nQ: ")]
        shown = body[body.rfind("\nA: "):].partition("\n\n")[2]  # what follows the last example
        answer = gold.get(last_question(request.prompt))
        return answer if answer and answer in shown else "unknown"

    return FakeModel(script=script, default=read)


@pytest.mark.parametrize("main_name, k, score", [
    ("odqa", 2, 1.0),
    ("no_decomp", 2, 0.375),
    ("no_decomp", 5, 1.0),
    ("no_context", 2, 0.0),
])
def test_the_programs_over_the_bundled_questions(tmp_path, index_dir, main_name, k, score):
    done = run_dataset(PROGRAM, QUESTIONS, model=_oracle(), main=main_name, run_dir=tmp_path / "run",
                       fields={"index": str(index_dir), "K": str(k)})
    assert done.rows == len(ROWS) and done.failed == 0
    assert done.score == pytest.approx(score)


def test_one_decomposition_step_by_step(index_dir):
    question = ROWS[0]["question"]
    model = FakeModel(
        script={question: ["[retrieve_odqa] Who directed the film The Glass Orchard?",
                           "[retrieve_odqa] In which city was #1 born?", "[multihop_reader] [#1, #2]", "[EOQ]"]},
        mapping={"Who directed the film The Glass Orchard?": "Mira Calloway",
                 'In which city was "Mira Calloway" born?': "Port Emmerich", question: "Port Emmerich"})
    session = Session(model=model)
    with session.trusting([index_dir]):  # an index outside the working folder: allowed on purpose
        result = session.run(session.load(PROGRAM), {"question": question, "K": 2, "index": str(index_dir)})
    assert result.error is None and result.answer == "Port Emmerich"
    readers = [p for p in model.prompts if not p.endswith("QS:")]
    assert len(readers) == 3  # two single-hop readers, then the multi-hop reader
    assert "Title: The Glass Orchard\nThe Glass Orchard is a 1987 drama film directed by Mira Calloway." in readers[0]
    assert "Title: Mira Calloway\n" in readers[1] and readers[1].endswith('Q: In which city was "Mira Calloway" born?\nA:')
    assert "Title: Port Emmerich\n" in readers[2] and readers[2].endswith(f"Q: {question}\nA:")
    assert readers[2].count("Title: Mira Calloway\n") == 1  # paragraphs found twice are shown once
    searches = [n for n in result.trace.walk() if n.kind == "search"]
    assert len(searches) == 4  # one per hop, then the hops' answers and the whole question


def test_k_and_index_are_required_inputs(index_dir):
    session = Session(model=FakeModel(default="x"))
    module = session.load(PROGRAM)
    result = session.run(module, {"question": ROWS[0]["question"], "index": str(index_dir)})
    assert "program 'odqa' needs 'K', which the row does not provide" in result.error
    result = session.run(module, {"question": ROWS[0]["question"]}, target="no_context")
    assert result.error is None and result.answer == "x"


def test_run_from_the_command_line(tmp_path, index_dir):
    question = ROWS[1]["question"]
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"mapping": {question: "Harlow Cross"}}))
    result = CliRunner().invoke(main, ["run", "odqa/odqa", "--main", "no_decomp", "-q", question, "--model",
                                       f"fake:{answers}", "--field", f"index={index_dir}", "--field", "K=3"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "Harlow Cross"
    assert "odqa/odqa" in CliRunner().invoke(main, ["programs"]).output

"""The `retrieve` kind over a real tantivy index: answers, options, checks, errors that end only
their row, the step cache keyed by the index version, budgets and the worker thread."""
import json
import re
import threading

import pytest

from decomp import Session
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.errors import DecompError, HandlerError
from decomp.handlers.base import LoadContext
from decomp.handlers.kinds.retrieve import RetrieveHandler, RetrieveOptions
from decomp.handlers.search.corpus import read_corpus
from decomp.handlers.search.tantivy_index import TantivyIndex, build_index
from decomp.runtime.engine.budgets import Budget
from decomp.runtime.engine.cache import StepCache

ROWS = [
    {"id": "varn", "title": "Lake Varn", "text": "Lake Varn is a deep lake in the north. The town of Brisk lies near it."},
    {"id": "brisk", "title": "Brisk", "text": "Brisk is a fishing town on the river Corran, founded in 1702 by Ottilie Marsh."},
    {"id": "marsh", "title": "Ottilie Marsh", "text": "Ottilie Marsh was a cartographer born in Calder."},
    {"id": "calder", "title": "Calder", "text": "Calder is a city famous for its bicycle workshops."},
]


def _corpus(path, rows=ROWS):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _build(folder, rows=ROWS, **kw):
    corpus = _corpus(folder.parent / f"{folder.name}-corpus.jsonl", rows)
    return build_index(read_corpus(corpus), folder, **kw)


@pytest.fixture
def index(tmp_path):
    folder = tmp_path / "index"
    _build(folder)
    return folder


def _module(tmp_path, text, name="r.decomp"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_answers_the_k_best_paragraphs(tmp_path, index):
    path = _module(tmp_path, 'handler retrieve = retrieve(index="index", k=2)\nmain retrieve\n')
    session = Session()
    result = session.run(session.load(path), {"question": 'Who founded "Brisk" (the town)?'})
    assert result.error is None
    assert [hit["id"] for hit in result.answer] == ["brisk", "varn"]
    assert set(result.answer[0]) == {"id", "title", "text", "score"}
    assert result.answer[0]["score"] >= result.answer[1]["score"]


def test_fields_k_and_index_from_inputs(tmp_path, index):
    text = ('handler r = retrieve(index="#where", k="#K", fields=["title"])\n'
            'program p(question, K, where) {\n    QS: [r] #question\n}\nmain p\n')
    session = Session()
    module = session.load(_module(tmp_path, text))
    result = session.run(module, {"question": "Calder", "K": "1", "where": str(index)})
    assert result.error is None and result.answer == [{"title": "Calder"}]
    result = session.run(module, {"question": "Calder", "K": 0, "where": str(index)})
    assert "k must be a whole number from 1 to 1000, got 0" in result.error
    result = session.run(module, {"question": "Calder", "K": 2, "where": str(tmp_path / "none")})
    assert "[r] retrieve" in result.error and "no index at" in result.error and "r.decomp:3:" in result.error


def test_missing_inputs_are_named(tmp_path, index):
    handler = RetrieveHandler("r", RetrieveOptions(index="#where", k="#K"), None, LoadContext(tmp_path))
    with pytest.raises(HandlerError, match="no input named 'K'"):
        Session().run_handler(handler, "brisk", inputs={"where": str(index)})
    with pytest.raises(HandlerError, match="no input named 'where' holding a folder"):
        Session().run_handler(handler, "brisk", inputs={"K": 3})


@pytest.mark.parametrize("options, message", [
    ('index="missing"', "no index at"),
    ('index="index", url="http://x:9200"', 'url is for backend="elasticsearch"'),
    ('', 'needs index="DIR"'),
    ('index="index", k="five"', 'k must be a number or "#name"'),
    ('index="index", k=0', "k must be between 1 and 1000"),
    ('index="index", fields=["title", "body"]', "unknown: body"),
    ('backend="elasticsearch"', 'needs url="http://HOST:PORT"'),
    ('backend="elasticsearch", url="localhost:9200", index_name="x"', "url must start with http://"),
    ('backend="elasticsearch", url="$not a name", index_name="x"', "url must start with http://"),
    ('backend="elasticsearch", url="http://h:9200", index="index"', "name an Elasticsearch index with index_name"),
    ('index="index", backend="solr"', "backend"),
])
def test_check_errors(tmp_path, index, options, message):
    path = _module(tmp_path, f"handler r = retrieve({options})\nmain r\n")
    with pytest.raises(DecompError) as err:
        Session().load(path)
    assert message in err.value.format()
    assert f"{path}:1:" in err.value.format()


def test_escaping_and_empty_results_are_plain_failures(tmp_path, index):
    handler = RetrieveHandler("r", RetrieveOptions(index="index"), None, LoadContext(tmp_path))
    session = Session()
    found = session.run_handler(handler, 'title:brisk AND (lake OR "varn" NOT) ^2 ~ * [a TO b]')
    assert {hit["id"] for hit in found} >= {"brisk", "varn"}
    with pytest.raises(HandlerError, match="no paragraph of the index .* matches 'zebra'"):
        session.run_handler(handler, "zebra")
    with pytest.raises(HandlerError, match="nothing to search for: '\\?\\?' has no words"):
        session.run_handler(handler, "??")


def test_a_written_default_answers_an_empty_retrieval(tmp_path, index):
    handler = RetrieveHandler("r", RetrieveOptions(index="index", default=[]), None, LoadContext(tmp_path))
    assert Session().run_handler(handler, "zebra") == []
    assert Session().run_handler(handler, "?!") == []
    assert Session().run_handler(handler, "brisk")[0]["id"] == "brisk"
    nothing = RetrieveHandler("r", RetrieveOptions(index="index", default=None), None, LoadContext(tmp_path))
    assert Session().run_handler(nothing, "zebra") is None


def test_a_failing_row_names_the_handler_and_the_run_goes_on(tmp_path, index):
    program = _module(tmp_path, 'handler retrieve = retrieve(index="index", k=1)\n'
                                'program p(question) {\n    QS: [retrieve] #question\n}\nmain p\n')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "ok", "question": "Brisk"}, {"id": "none", "question": "zebra"}, {"id": "ok2", "question": "Calder"}]))
    done = run_dataset(program, data, model="fake:none", run_dir=tmp_path / "run")
    records = {r["id"]: r for r in done.records()}
    assert done.rows == 3 and done.failed == 1
    assert records["ok"]["answer"][0]["id"] == "brisk" and records["ok2"]["answer"][0]["id"] == "calder"
    assert records["none"]["error"].startswith(f"[retrieve] retrieve, {program}:3:")
    assert "no paragraph of the index" in records["none"]["error"] and "'zebra'" in records["none"]["error"]


def test_an_index_removed_after_loading_fails_its_rows(tmp_path, index):
    import shutil

    session = Session()
    module = session.load(_module(tmp_path, 'handler retrieve = retrieve(index="index")\nmain retrieve\n'))
    shutil.rmtree(index)
    result = session.run(module, {"question": "brisk"})
    assert "[retrieve] retrieve" in result.error and "no index at" in result.error


def _cached_run(tmp_path, question):
    session = Session(cache=StepCache(tmp_path / "steps.sqlite"))
    module = session.load(tmp_path / "c.decomp")
    result = session.run(module, {"question": question})
    assert result.error is None, result.error
    return [hit["id"] for hit in result.answer], result.usage.cache_hits, result.trace


def test_cached_per_query_and_index_version(tmp_path, index):
    _module(tmp_path, 'handler retrieve = retrieve(index="index", k=3)\nmain retrieve\n', "c.decomp")
    first, hits, trace = _cached_run(tmp_path, "Brisk town")
    assert hits == 0 and first[0] == "brisk"
    search = [n for n in trace.walk() if n.kind == "search"]
    assert len(search) == 1 and search[0].label == f"tantivy:{index}" and search[0].query == "Brisk town"
    again, hits, _ = _cached_run(tmp_path, "brisk,  TOWN?")  # the same words: the same entry
    assert (again, hits) == (first, 1)
    # a rebuilt index is a new version: the old entries are never read again
    _build(index, [{"id": "new", "title": "Brisk harbour", "text": "The new harbour of Brisk town."}], force=True)
    rebuilt, hits, _ = _cached_run(tmp_path, "Brisk town")
    assert (rebuilt, hits) == (["new"], 0)
    # so is an index grown by an add
    _build(index, [{"id": "more", "title": "Brisk town hall", "text": "Brisk town hall, Brisk town."}], add=True)
    grown, hits, _ = _cached_run(tmp_path, "Brisk town")
    assert hits == 0 and grown[0] == "more" and "new" in grown


def test_a_run_records_the_index_manifest(tmp_path, index):
    path = _module(tmp_path, 'handler retrieve = retrieve(index="index")\nmain retrieve\n')
    module = Session().load(path)
    assert index / "decomp-index.json" in module.files


def test_searches_count_against_the_search_budget(tmp_path, index):
    text = ('handler r = retrieve(index="index", k=1)\n'
            'program p(question) {\n    QS: [r] #question\n    QS: [r] Calder\n}\nmain p\n')
    session = Session(budget=Budget(service_calls=(("search", 1),)))
    result = session.run(session.load(_module(tmp_path, text)), {"question": "Brisk"})
    # the two steps run at once: either is the one refused
    assert re.fullmatch(rf"\[r\] retrieve, {re.escape(str(tmp_path / 'r.decomp'))}:[34]:5: budget exhausted: "
                        r"search calls for this row reached 1", result.error)


def test_searches_run_in_a_worker_thread(tmp_path, index, monkeypatch):
    threads = []
    original = TantivyIndex.search

    def search(self, terms, k):
        threads.append(threading.get_ident())
        return original(self, terms, k)

    monkeypatch.setattr(TantivyIndex, "search", search)
    handler = RetrieveHandler("r", RetrieveOptions(index="index"), None, LoadContext(tmp_path))
    Session().run_handler(handler, "brisk")
    assert threads and threads[0] != threading.get_ident()


def test_kind_is_registered_and_not_cached_itself():
    from decomp.handlers.plugins import load as load_plugins
    import decomp.handlers.kinds  # noqa: F401

    assert load_plugins().kinds["retrieve"] is RetrieveHandler
    assert RetrieveHandler.cacheable is False


def test_a_url_variable_that_holds_no_url_is_refused_without_echoing_it(monkeypatch):
    """`url="$NAME"` may name any variable: unless it holds an http(s) URL it is refused, and its
    value (an API key, a token) never reaches a message or a trace."""
    import json as _json

    from decomp import Session

    monkeypatch.setenv("SOME_TOKEN", "sk-supersecret-123")
    session = Session(default_model=None)
    module = session.load("e.decomp", text='handler r = retrieve(backend="elasticsearch", url="$SOME_TOKEN", '
                                           'index_name="wiki")\nmain r\n')
    result = session.run(module, {"question": "hello"})
    assert result.error is not None and "does not hold an http(s) URL" in result.error
    assert "sk-supersecret-123" not in result.error
    assert "sk-supersecret-123" not in _json.dumps(result.trace.to_dict())


def test_the_api_key_variable_is_never_sent_to_a_url_the_file_wrote(monkeypatch):
    from decomp.handlers.search.elastic import ElasticService

    monkeypatch.setenv("ELASTIC_API_KEY", "KEY-FROM-ENV")
    assert ElasticService("http://written.example:9200", "wiki", api_key="")._api_key is None
    assert ElasticService("http://named.example:9200", "wiki")._api_key == "KEY-FROM-ENV"


# ---- an index folder named by an input is confined (issue 14: a data row must not reach /etc)
WHERE_PROGRAM = ('handler r = retrieve(index="#where", k=1, fields=["id"])\n'
                 'program p(question, where) {\n    QS: [r] #question\n}\nmain p\n')


@pytest.fixture
def confined(tmp_path, monkeypatch):
    """A program in prog/, an index outside both it and the working folder, one in the working
    folder (work/, made the current folder), and rows naming each."""
    (tmp_path / "prog").mkdir()
    program = _module(tmp_path / "prog", WHERE_PROGRAM)
    outside = tmp_path / "elsewhere" / "index"
    outside.parent.mkdir()
    _build(outside)
    work = tmp_path / "work"
    work.mkdir()
    _build(work / "idx")
    monkeypatch.chdir(work)
    return program, outside


def _where_rows(tmp_path, *folders):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": "Calder", "where": f}) + "\n"
                            for i, f in enumerate(folders)), encoding="utf-8")
    return data


def test_a_data_row_cannot_name_an_index_outside_the_allowed_folders(tmp_path, confined):
    program, outside = confined
    data = _where_rows(tmp_path, str(outside), "/etc", "idx", "../elsewhere/index")
    done = run_dataset(program, data, run_dir=tmp_path / "run")
    records = {r["id"]: r for r in done.records()}
    assert records["r2"].get("error") is None and records["r2"]["answer"] == [{"id": "calder"}]  # in the cwd
    for row in ("r0", "r1", "r3"):
        error = records[row]["error"]
        assert "the folder in the input 'where' is outside the working folder, the program's folder" in error
        assert "--allow-root" in error
        assert str(outside) not in error and "/etc" not in error and "elsewhere" not in error  # never echoed


def test_a_folder_the_user_gives_is_allowed(tmp_path, confined):
    program, outside = confined
    data = _where_rows(tmp_path, "/etc")
    # --field / fields=: the user's own, for every row (overriding the row's folder)
    done = run_dataset(program, data, run_dir=tmp_path / "fields", fields={"where": str(outside)})
    assert done.failed == 0 and done.records()[0]["answer"] == [{"id": "calder"}]
    # --allow-root, or a session's trusting() from Python
    session = Session()
    module = session.load(program)
    refused = session.run(module, {"question": "Calder", "where": str(outside)})
    assert "is outside the working folder" in refused.error
    with session.trusting([outside.parent]):
        allowed = session.run(module, {"question": "Calder", "where": str(outside)})
    assert allowed.error is None and allowed.answer == [{"id": "calder"}]
    assert "is outside the working folder" in session.run(module, {"question": "Calder", "where": str(outside)}).error

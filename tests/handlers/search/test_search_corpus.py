"""Reading a corpus: records, defaults, and bad lines named by file and line."""
import pytest

from decomp.handlers.search.corpus import CorpusError, ReadStats, Record, read_corpus


def _write(tmp_path, *lines):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_records_with_defaults(tmp_path):
    path = _write(tmp_path, '{"id": "a", "title": " T ", "text": " one "}', "",
                  '{"id": 7, "text": "two"}', '{"title": "Named", "text": "three"}', '{"text": "four", "title": null}')
    assert list(read_corpus(path)) == [Record("a", "T", "one"), Record("7", "", "two"),
                                       Record("Named", "Named", "three"), Record("c.jsonl:5", "", "four")]


@pytest.mark.parametrize("line, message", [
    ('{"title": "x"}', 'the paragraph has no "text"'),
    ('{"text": "   "}', 'the paragraph has an empty "text"'),
    ('{"text": 3}', 'a "text" that is int, not a string'),
    ('{"text": "t", "title": 5}', '"title" is int, not a string'),
    ('{"text": "t", "id": true}', '"id" is bool, not a string or an integer'),
    ('["text"]', "a corpus line is a JSON object"),
    ('{"text": "t"', "not a JSON line"),
])
def test_a_bad_line_is_named(tmp_path, line, message):
    path = _write(tmp_path, '{"text": "fine"}', line)
    with pytest.raises(CorpusError) as err:
        list(read_corpus(path))
    assert str(err.value).startswith(f"{path}:2: ")
    assert message in str(err.value)


def test_skip_bad_counts_and_keeps_the_first_problems(tmp_path):
    lines = ['{"text": "ok"}'] + ['{"title": "no text"}'] * 7 + ['{"text": "also ok"}']
    stats = ReadStats()
    records = list(read_corpus(_write(tmp_path, *lines), skip_bad=True, stats=stats))
    assert [r.text for r in records] == ["ok", "also ok"]
    assert stats.records == 2 and stats.skipped == 7 and len(stats.problems) == ReadStats.KEEP
    assert stats.problems[0].endswith(':2: the paragraph has no "text"')
    assert stats.bytes_read == (tmp_path / "c.jsonl").stat().st_size


def test_missing_corpus(tmp_path):
    with pytest.raises(CorpusError, match="cannot read the corpus"):
        list(read_corpus(tmp_path / "nope.jsonl"))

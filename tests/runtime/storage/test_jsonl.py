"""The one JSONL reader and writer (decomp.runtime.storage.jsonl)."""
from decomp.runtime.storage.jsonl import json_line, read_lines, write_jsonl


def test_every_line_comes_back_numbered_with_its_value_or_its_error():
    data = '{"a": 1}\n\n[1, 2]\nnot json\n{"b": "é"}'.encode() + b'\n\xff\n'
    lines = list(read_lines(data))
    assert [line.number for line in lines] == [1, 3, 4, 5, 6]
    assert lines[0].value == {"a": 1} and lines[1].value == [1, 2] and lines[3].value == {"b": "é"}
    assert lines[2].problem.startswith("line 4: not valid JSON")
    assert lines[4].error.startswith("not valid UTF-8")


def test_objects_blank_lines_bom_and_line_breaks():
    text = "\ufeff[1]\r\n\r\n{\"x\": 2}\r"
    lines = list(read_lines(text, objects=True, blank=True))
    assert [(line.number, line.error) for line in lines] == [
        (1, "expected a JSON object, got a list"), (2, "a blank line"), (3, None)]
    assert lines[2].value == {"x": 2}


def test_written_lines_read_back(tmp_path):
    rows = [{"id": 1, "text": "naïve\u2028line"}, {"id": 2, "set": {3}}]
    path = tmp_path / "deep" / "rows.jsonl"
    write_jsonl(path, rows)
    assert json_line({"a": "é"}) == '{"a": "é"}\n'
    back = [line.value for line in read_lines(path.read_bytes())]
    assert back == [{"id": 1, "text": "naïve\u2028line"}, {"id": 2, "set": "{3}"}]

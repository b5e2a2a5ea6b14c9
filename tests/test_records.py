import json

import pytest

from mens.errors import MensError
from mens.files import write_jsonl_atomic
from mens.records import Pair, read_pairs


def test_aliases_and_unknown_keys_round_trip(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"instruction": "add", "output": "fn a() {}", "rating": 5, "x": 1}) + "\n")
    pairs, skipped = read_pairs(path)
    assert skipped == []
    assert pairs[0].prompt == "add" and pairs[0].response == "fn a() {}" and pairs[0].rating == 5
    assert pairs[0].to_dict()["x"] == 1


def test_messages_form_takes_last_assistant_turn():
    p = Pair.from_dict({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
    assert p.prompt == "q" and p.response == "a"
    assert p.chat("sys")[0] == {"role": "system", "content": "sys"}


@pytest.mark.parametrize("line, message", [
    ("{not json", "malformed JSON"),
    ('{"prompt": "x"}', "field 'response'"),
    ('{"prompt": "x", "response": "y", "rating": 9}', "field 'rating'"),
    ('{"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}]}', "last message"),
])
def test_bad_line_names_file_and_line(tmp_path, line, message):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a", "response": "b"}\n' + line + "\n")
    with pytest.raises(MensError) as err:
        read_pairs(path)
    assert err.value.where == f"{path}:2" and message in err.value.what
    pairs, skipped = read_pairs(path, lenient=True)
    assert len(pairs) == 1 and skipped[0].startswith(f"{path}:2")


def test_a_byte_order_mark_at_the_start_is_not_data(tmp_path):
    """Windows editors and tools start UTF-8 files with a BOM: the first row reads as any other
    (a BOM later in the file is not a file's start, and stays an error)."""
    path = tmp_path / "p.jsonl"
    row = json.dumps({"prompt": "a", "response": "b"})
    path.write_bytes(("\ufeff" + row + "\n" + row + "\n").encode("utf-8"))
    pairs, skipped = read_pairs(path)
    assert [p.prompt for p in pairs] == ["a", "a"] and skipped == []
    path.write_bytes((row + "\n\ufeff" + row + "\n").encode("utf-8"))
    with pytest.raises(MensError) as err:
        read_pairs(path)
    assert err.value.where == f"{path}:2"


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "o.jsonl"

    def rows():
        yield {"a": 1}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_jsonl_atomic(out, rows())
    assert list(tmp_path.iterdir()) == []
    assert write_jsonl_atomic(out, [{"a": 1}, Pair(prompt="p", response="r")]) == 2
    assert len(out.read_text().splitlines()) == 2

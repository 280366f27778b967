"""Corpus readers on the shipped real data (StrategyQA paragraph file, the 150,679 distractor
paragraphs) and on small files mixing real distractor lines with malformed ones."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from helpers import real_lines
from sqa.indexing.corpus import ReadStats, detect_format, read_corpus, read_corpus_jsonl, read_strategyqa_paragraphs
from sqa.strategyqa import DISTRACTORS_FILE, PARAGRAPHS_FILE
from sqa.types import SqaError

N_GOLD = 9_251
N_DISTRACTORS = 150_679


# --- the shipped files, read whole -------------------------------------------------------------


def test_strategyqa_paragraph_file_reads_every_gold_paragraph():
    stats = ReadStats()
    paras = list(read_strategyqa_paragraphs(PARAGRAPHS_FILE, stats=stats))
    assert stats.read == len(paras) == N_GOLD
    assert stats.skipped == 0 and stats.errors == []
    by_id = {p.evidence_id: p for p in paras}
    assert len(by_id) == N_GOLD
    black_sea = by_id["Black Sea-2"]
    assert black_sea.title == "Black Sea"
    assert "maximum depth of 2,212" in black_sea.text
    assert detect_format(PARAGRAPHS_FILE) == "strategyqa"


def test_distractor_file_streams_every_paragraph_with_evidence_ids():
    stats = ReadStats()
    ids = set()
    first = None
    for p in read_corpus(DISTRACTORS_FILE, stats=stats):
        first = first or p
        ids.add(p.evidence_id)
    assert stats.read == N_DISTRACTORS and stats.skipped == 0
    assert len(ids) == N_DISTRACTORS  # evidence IDs are unique
    row = json.loads(real_lines(1)[0])
    assert first.evidence_id == f"{row['title']}-{row['para_id']}"
    assert first.text == row["para"] and first.title == row["title"]
    assert detect_format(DISTRACTORS_FILE) == "jsonl"
    gold_ids = {p.evidence_id for p in read_strategyqa_paragraphs(PARAGRAPHS_FILE)}
    assert not ids & gold_ids  # the data README promises no collision with a gold ID


# --- malformed JSONL ---------------------------------------------------------------------------


@pytest.fixture()
def mixed_jsonl(tmp_path):
    """A gzip JSONL file: 11 valid real distractor lines with malformed ones in between.

    Returns (path, valid evidence IDs in order, {line number: reason fragment} of the bad lines)."""
    good = real_lines(12, start=1000)
    row = json.loads(good[0])
    no_para = {k: v for k, v in row.items() if k != "para"}
    lines = [
        good[0],  # 1
        good[1],  # 2
        good[2][: len(good[2]) // 2],  # 3  truncated -> invalid JSON
        "",  # 4  blank: ignored, not an error
        good[3],  # 5
        json.dumps(no_para),  # 6  missing field para
        json.dumps({**row, "title": 42}),  # 7  wrong type (title)
        "   ",  # 8  blank
        good[4],  # 9
        json.dumps({**row, "para": ["not", "a", "str"]}),  # 10 wrong type (para)
        json.dumps([row["title"], row["para"]]),  # 11 not an object
        *good[5:12],  # 12..18
        '{"title": "x", "para_id": 1, "para": ',  # 19 cut-off last line
    ]
    path = tmp_path / "mixed.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    used = [good[0], good[1], good[3], good[4], *good[5:12]]  # good[2] is only used truncated
    valid = [f"{json.loads(g)['title']}-{json.loads(g)['para_id']}" for g in used]
    bad = {
        3: "invalid JSON",
        6: "missing field(s) para",
        7: "title must be a non-empty string",
        10: "para must be a string",
        11: "not a JSON object",
        19: "invalid JSON",
    }
    return path, valid, bad


def test_malformed_lines_are_counted_reported_and_skipped(mixed_jsonl):
    path, valid, bad = mixed_jsonl
    stats = ReadStats()
    reported = []
    paras = list(read_corpus(path, stats=stats, on_error=lambda f, line, why: reported.append((f, line, why))))
    assert [p.evidence_id for p in paras] == valid
    assert stats.read == len(valid) == 11
    assert stats.skipped == len(bad) == 6
    assert [line for _, line, _ in reported] == sorted(bad)
    assert stats.errors == reported
    for f, line, why in reported:
        assert f == str(path)
        assert bad[line] in why, (line, why)
    assert stats.position == 19  # every line consumed


def test_strict_mode_stops_at_the_first_malformed_line_naming_file_and_line(mixed_jsonl):
    path, valid, bad = mixed_jsonl
    got = []
    with pytest.raises(SqaError) as e:
        for p in read_corpus(path, strict=True):
            got.append(p.evidence_id)
    assert f"{path}:3:" in str(e.value)
    assert "--strict" in str(e.value)
    assert got == valid[:2]


def test_skip_lines_resumes_after_the_lines_already_consumed(mixed_jsonl):
    path, valid, _ = mixed_jsonl
    stats = ReadStats()
    rest = [p.evidence_id for p in read_corpus_jsonl(path, stats=stats, skip_lines=9)]
    assert rest == valid[4:]  # lines 1-9 held valid[0..3]
    assert stats.skipped == 3  # the malformed lines after line 9
    assert [e[1] for e in stats.errors] == [10, 11, 19]


def test_plain_and_xz_jsonl_read_the_same_as_gzip(tmp_path):
    lines = real_lines(50, start=5000)
    plain = tmp_path / "c.jsonl"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    xz = tmp_path / "c.jsonl.xz"
    with lzma.open(xz, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    a = list(read_corpus(plain))
    b = list(read_corpus(xz))
    assert len(a) == 50 and a == b
    assert a[0].evidence_id == "{title}-{para_id}".format(**json.loads(lines[0]))


def test_malformed_strategyqa_entries_are_counted_by_entry_number(tmp_path):
    with lzma.open(PARAGRAPHS_FILE, "rt", encoding="utf-8") as f:
        data = json.load(f)
    keys = list(data)[:5]
    small = {k: data[k] for k in keys}
    small["Broken-1"] = {"title": "Broken", "content": None}  # entry 6: content not a string
    small["Broken-2"] = "just a string"  # entry 7: not an object
    small[keys[0] + "-copy"] = dict(data[keys[0]])  # entry 8: fine
    path = tmp_path / "paras.json"
    path.write_text(json.dumps(small), encoding="utf-8")
    stats = ReadStats()
    paras = list(read_corpus(path, stats=stats))
    assert [p.evidence_id for p in paras] == keys + [keys[0] + "-copy"]
    assert stats.read == 6 and stats.skipped == 2
    assert [(e[1]) for e in stats.errors] == [6, 7]
    assert all(e[0] == str(path) for e in stats.errors)
    with pytest.raises(SqaError, match=rf"{path}:6:"):
        list(read_corpus(path, strict=True))


def test_missing_truncated_and_non_json_files_raise_sqaerror_naming_the_file(tmp_path):
    missing = tmp_path / "nope.jsonl.gz"
    with pytest.raises(SqaError, match="nope.jsonl.gz: corpus file not found"):
        list(read_corpus_jsonl(missing))

    full = gzip.compress(("\n".join(real_lines(200)) + "\n").encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(full[: len(full) // 2])
    with pytest.raises(SqaError, match="cut.jsonl.gz: compressed stream is truncated"):
        list(read_corpus_jsonl(cut))

    csv = tmp_path / "table.csv"
    csv.write_text("title,para\nA,b\n", encoding="utf-8")
    with pytest.raises(SqaError, match=r"table.csv:1: not a JSON corpus file"):
        detect_format(csv)


# --- wrong optional types, damaged compressed files ---------------------------------------------


def test_wrong_types_in_any_field_are_malformed_lines_never_crashes_or_odd_ids(tmp_path):
    """Valid JSON with a wrong type in an optional field (or an odd para_id) is one malformed
    line: skipped and counted with its reason, the rest of the file is read."""
    good = real_lines(10, start=2000)
    rows = [json.loads(g) for g in good]
    mutations = {
        "headers must be a list of strings": [
            {"headers": 5},
            {"headers": "abc"},
            {"headers": ["a", 3]},
            {"headers": {"a": 1}},
        ],
        "section must be a string": [{"section": 7}, {"section": ["Early life"]}, {"section": {"x": 1}}],
        "para_id must be an integer or a non-empty string": [
            {"para_id": {"a": 1}},
            {"para_id": 1.5},
            {"para_id": True},
            {"para_id": [1]},
            {"para_id": ""},
        ],
        "title must be a non-empty string": [{"title": ""}, {"title": ["x"]}],
    }
    lines, expect = list(good), {}
    for reason, changes in mutations.items():
        for change in changes:
            lines.append(json.dumps({**rows[len(expect) % len(rows)], **change}))
            expect[len(lines)] = reason
    lines.append(json.dumps({**rows[0], "section": None, "headers": None, "para_id": "7b"}))  # null = absent: valid
    path = tmp_path / "types.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = ReadStats()
    paras = list(read_corpus(path, stats=stats))
    ids = [p.evidence_id for p in paras]
    assert ids == [f"{r['title']}-{r['para_id']}" for r in rows] + [f"{rows[0]['title']}-7b"]
    assert paras[-1].section == "" and paras[-1].headers == ()
    assert all(isinstance(h, str) for p in paras for h in p.headers)
    assert paras[0].headers == tuple(rows[0]["headers"]) and paras[0].section == rows[0]["section"]
    assert stats.skipped == len(expect) == 14
    assert {line: why for _, line, why in stats.errors}.keys() == expect.keys()
    for _, line, why in stats.errors:
        assert expect[line] in why, (line, why)


def test_wrong_types_in_the_strategyqa_paragraph_file_are_malformed_entries(tmp_path):
    with lzma.open(PARAGRAPHS_FILE, "rt", encoding="utf-8") as f:
        data = json.load(f)
    keys = list(data)[:3]
    small = {k: data[k] for k in keys}
    small["Bad-1"] = {**data[keys[0]], "headers": 5}
    small["Bad-2"] = {**data[keys[0]], "section": 7}
    small["Bad-3"] = {**data[keys[0]], "headers": "abc"}
    path = tmp_path / "paras.json"
    path.write_text(json.dumps(small), encoding="utf-8")
    stats = ReadStats()
    assert [p.evidence_id for p in read_corpus(path, stats=stats)] == keys
    assert [e[1] for e in stats.errors] == [4, 5, 6] and stats.skipped == 3


@pytest.mark.parametrize("damage", ["truncated", "trailing garbage", "corrupt middle"])
def test_a_small_damaged_gzip_raises_sqaerror_naming_the_file(tmp_path, damage):
    data = gzip.compress(("\n".join(real_lines(50)) + "\n").encode())
    assert len(data) < 65536  # small: the format sniffing reads it whole
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "trailing garbage":
        data = data + b"garbage!!"
    else:
        mid = len(data) // 2
        data = data[:mid] + bytes(b ^ 0xFF for b in data[mid : mid + 64]) + data[mid + 64 :]
    path = tmp_path / "small.jsonl.gz"
    path.write_bytes(data)
    with pytest.raises(SqaError, match="small.jsonl.gz: compressed stream is truncated or corrupt"):
        list(read_corpus(path))

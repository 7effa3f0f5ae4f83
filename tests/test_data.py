"""Tests of seqlab.data: built-in tasks, corpus readers, splits, and the real corpora in ../shared/data."""

from __future__ import annotations

import gzip
import logging
import re
from collections import Counter
from datetime import date, datetime
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from seqlab.config import load_config
from seqlab.corpora import Corpus, DataConfig, LinesCorpus, SplitConfig, TsvCorpus
from seqlab.data import (
    DataError,
    generate_task,
    iter_sentences,
    load_splits,
    read_corpus,
    read_sentences,
    resolve_data_dir,
    tasks,
)
from seqlab.data.splits import split_pairs
from seqlab.data.tasks import generate_addition, generate_date
from seqlab.metrics import seen_form

CORPUS = TypeAdapter(Corpus)


def corpus(**fields) -> Corpus:
    return CORPUS.validate_python(fields)


def write(path: Path, content: str | bytes) -> Path:
    """Write ``content`` to ``path``, gzipped if the name ends in .gz."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


# --- date task ---------------------------------------------------------------

# strptime formats of the written forms (strptime matches names in any case).
DATE_PATTERNS = {
    "short": (re.compile(r"\d{1,2}/\d{1,2}/\d\d"), "%m/%d/%y"),
    "medium": (re.compile(r"[A-Za-z]{3} \d{1,2}, \d{4}"), "%b %d, %Y"),
    "long": (re.compile(r"[A-Za-z]{4,} \d{1,2}, \d{4}"), "%B %d, %Y"),
    "full": (re.compile(r"[A-Za-z]+, [A-Za-z]+ \d{1,2}, \d{4}"), "%A, %B %d, %Y"),
}


def date_shape(text: str) -> tuple[str, str]:
    """(form, casing) of a written date; "May" counts as medium."""
    form = next(name for name, (pattern, _) in DATE_PATTERNS.items() if pattern.fullmatch(text))
    casing = "digits" if form == "short" else "upper" if text.isupper() else "lower" if text.islower() else "title"
    return form, casing


def test_date_is_deterministic_by_seed():
    assert generate_date(200, seed=3) == generate_date(200, seed=3)
    assert generate_date(200, seed=3) != generate_date(200, seed=4)
    assert generate_task("date", 50, 7) == generate_date(50, 7)


def test_date_sources_parse_back_to_their_iso_target():
    pairs = generate_date(3000, seed=0)
    assert len(pairs) == 3000
    for source, target in pairs:
        assert source == source.strip() and "_" not in source and "  " not in source
        day = date.fromisoformat(target)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", target)
        assert date(1970, 1, 1) <= day <= date(2017, 12, 31)
        form, _ = date_shape(source)
        assert datetime.strptime(source, DATE_PATTERNS[form][1]).date() == day, source
        if form == "full":
            assert source.split(",")[0].lower() == day.strftime("%A").lower(), source


def test_date_has_every_form_and_casing_in_book_proportions():
    shapes = Counter(date_shape(source) for source, _ in generate_date(4000, seed=1))
    forms = {"short", "medium", "long", "full"}
    assert set(shapes) == {("short", "digits")} | {(f, c) for f in forms - {"short"} for c in ("title", "upper", "lower")}
    per_form: Counter[str] = Counter()
    for (form, _), count in shapes.items():
        per_form[form] += count
    for form in forms:  # a quarter each in date.txt ("May" moves a twelfth of long into medium)
        assert 0.17 < per_form[form] / 4000 < 0.33, per_form
    titled = sum(count for (form, casing), count in shapes.items() if casing == "title")
    assert 0.4 < titled / sum(count for (form, _), count in shapes.items() if form != "short") < 0.6


def test_date_short_form_pads_two_digit_years():
    sources = {source for source, target in generate_date(3000, seed=2) if target.startswith("200")}
    assert any(re.fullmatch(r"\d{1,2}/\d{1,2}/0\d", s) for s in sources)


# --- addition task -----------------------------------------------------------


def test_addition_sums_are_correct_and_operands_in_range():
    pairs = generate_addition(5000, seed=0)
    assert pairs == generate_task("addition", 5000, 0)
    operands = []
    for source, target in pairs:
        a, b = source.split("+")
        assert a == str(int(a)) and b == str(int(b))  # no padding, no leading zeros
        assert target == str(int(a) + int(b))
        operands += [int(a), int(b)]
    assert min(operands) >= 0 and max(operands) <= 999
    assert min(operands) < 10 and max(operands) > 990
    assert generate_addition(100, seed=1) != generate_addition(100, seed=2)


@pytest.mark.parametrize("generate", [generate_date, generate_addition])
def test_generated_sources_are_drawn_without_replacement_up_to_case_and_spacing(generate):
    pairs = generate(30000, seed=4)
    assert len({seen_form(source) for source, _ in pairs}) == len(pairs) == 30000


def test_seen_form_ignores_letter_case_and_spacing_only():
    assert seen_form("  SEPTEMBER 27,\t1994 ") == seen_form("september 27, 1994") == "september 27, 1994"
    assert seen_form("september 27, 1994") != seen_form("september 27 1994")
    assert seen_form("9/27/94") != seen_form("sep 27, 1994")


def test_every_written_form_of_a_day_is_counted_and_too_large_a_corpus_is_refused():
    day = date(1994, 9, 27)
    forms = {tasks._cased(form(day), casing) for form in tasks.DATE_FORMATS.values() for casing in tasks.CASINGS}
    assert len(forms) == 10  # the short form, and three casings of each of the others
    assert len({seen_form(form) for form in forms}) == tasks.DATE_FORMS_PER_DAY == 4
    with pytest.raises(ValueError, match="only 70,128 distinct sources exist"):
        generate_date(70129, seed=0)


def test_the_main_configs_splits_share_no_source_in_any_casing_or_spacing():
    config = load_config(Path(__file__).parents[1] / "configs" / "date.yaml")
    splits = load_splits(config.data, Path("/nonexistent"))
    parts = {name: {seen_form(source) for source, _ in pairs} for name, pairs in splits.items()}
    assert len(parts["test"]) == 5000 and parts["valid"]
    assert not parts["train"] & parts["test"] and not parts["train"] & parts["valid"] and not parts["valid"] & parts["test"]


def test_unknown_task_is_an_error():
    with pytest.raises(ValueError, match="unknown task 'dates'"):
        generate_task("dates", 10, 0)


# --- data directory ----------------------------------------------------------


def test_resolve_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("SEQLAB_DATA", raising=False)
    assert resolve_data_dir() == Path("data")
    monkeypatch.setenv("SEQLAB_DATA", str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_data_dir(str(tmp_path / "flag")) == tmp_path / "flag"


# --- readers -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["date.txt", "date.txt.gz"])
def test_book_reader_strips_padding(tmp_path, name):
    write(tmp_path / name, "16+75  _91  \n2/10/93   _1993-02-10\r\nsep 22, 2012 _2012-09-22\n")
    pairs = read_corpus(corpus(format="book", path=name), tmp_path)
    assert pairs == [("16+75", "91"), ("2/10/93", "1993-02-10"), ("sep 22, 2012", "2012-09-22")]


def test_book_reader_splits_at_the_first_underscore_and_tolerates_bom(tmp_path):
    write(tmp_path / "b.txt", "\ufeffa b _c_d\n")
    assert read_corpus(corpus(format="book", path="b.txt"), tmp_path) == [("a b", "c_d")]


def test_book_line_without_underscore_is_a_bad_line(tmp_path):
    write(tmp_path / "b.txt", "1+1 _2\n2+2 4\n")
    with pytest.raises(DataError, match=r"^.*b\.txt:2: no '_'"):
        read_corpus(corpus(format="book", path="b.txt"), tmp_path)


@pytest.mark.parametrize("name", ["p.tsv", "p.tsv.gz"])
def test_tsv_reader(tmp_path, name):
    write(tmp_path / name, "Hallo Welt\tHello  world\r\n  Guten Tag \t good day\nü\té\n")
    pairs = read_corpus(corpus(format="tsv", path=name), tmp_path)
    assert pairs == [("Hallo Welt", "Hello  world"), ("Guten Tag", "good day"), ("ü", "é")]


@pytest.mark.parametrize(
    "content, line, reason",
    [
        ("a\tb\nc\td\te\n", 2, "expected 2 tab-separated fields, found 3"),
        ("a\tb\nc\td\njust one\n", 3, "expected 2 tab-separated fields, found 1"),
        ("a\t \n", 1, "empty target"),
        ("a\tb\n\tb\n", 2, "empty source"),
        ("a\tb\n\nc\td\n", 2, "expected 2 tab-separated fields, found 1"),
    ],
)
def test_tsv_bad_lines_name_file_and_line(tmp_path, content, line, reason):
    path = write(tmp_path / "p.tsv", content)
    with pytest.raises(DataError) as err:
        read_corpus(corpus(format="tsv", path="p.tsv"), tmp_path)
    assert str(err.value) == f"{path}:{line}: {reason}"


@pytest.mark.parametrize("name", ["p.tsv", "p.tsv.gz"])
def test_invalid_utf8_names_file_and_line(tmp_path, name):
    path = write(tmp_path / name, b"a\tb\nc\td\ne\t\xff\xfe\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:3: not valid UTF-8"):
        read_corpus(corpus(format="tsv", path=name), tmp_path)


def test_broken_gzip_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "p.tsv.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: cannot read"):
        read_corpus(corpus(format="tsv", path="p.tsv.gz"), tmp_path)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_aligned_reader(tmp_path, suffix):
    write(tmp_path / f"train.de{suffix}", "Ein Hund .\nZwei Katzen\n")
    write(tmp_path / f"train.en{suffix}", "A dog .\r\nTwo cats \n")
    spec = corpus(format="aligned", source=f"train.de{suffix}", target=f"train.en{suffix}")
    assert read_corpus(spec, tmp_path) == [("Ein Hund .", "A dog ."), ("Zwei Katzen", "Two cats")]


@pytest.mark.parametrize("skip", [False, True])
def test_aligned_line_count_mismatch_names_both_files(tmp_path, skip):
    source = write(tmp_path / "s.txt", "a\nb\nc\n")
    target = write(tmp_path / "t.txt", "x\ny\n")
    with pytest.raises(DataError) as err:
        read_corpus(corpus(format="aligned", source="s.txt", target="t.txt"), tmp_path, skip_bad_lines=skip)
    message = str(err.value)
    assert message.startswith(f"{source}: 3 lines")
    assert f"{target}: 2 lines" in message


def test_aligned_empty_line_names_the_file_it_is_in(tmp_path):
    write(tmp_path / "s.txt", "a\nb\nc\n")
    target = write(tmp_path / "t.txt", "x\n  \nz\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(target))}:2: empty target$"):
        read_corpus(corpus(format="aligned", source="s.txt", target="t.txt"), tmp_path)


CHATBOT_LIKE = 'Q,A,label\n12시 땡!,하루가 또 가네요.,0\n"안녕, 친구","반가워, ""친구""",1\n"두 줄\n질문",답,2\n'


@pytest.mark.parametrize("name", ["c.csv", "c.csv.gz"])
def test_csv_reader_by_column_name(tmp_path, name):
    write(tmp_path / name, "\ufeff" + CHATBOT_LIKE)
    pairs = read_corpus(corpus(format="csv", path=name, source_column="Q", target_column="A"), tmp_path)
    assert pairs == [("12시 땡!", "하루가 또 가네요."), ("안녕, 친구", '반가워, "친구"'), ("두 줄\n질문", "답")]
    swapped = read_corpus(corpus(format="csv", path=name, source_column="A", target_column="label"), tmp_path)
    assert swapped[0] == ("하루가 또 가네요.", "0")


def test_csv_missing_column_lists_the_columns(tmp_path):
    path = write(tmp_path / "c.csv", CHATBOT_LIKE)
    with pytest.raises(DataError) as err:
        read_corpus(corpus(format="csv", path="c.csv", source_column="Q", target_column="answer"), tmp_path)
    assert str(err.value) == f"{path}:1: no column 'answer'; the columns are 'Q', 'A', 'label'"


def test_csv_bad_record_reports_its_physical_line(tmp_path):
    # The multi-line record occupies lines 4-5, so the short record is on line 6.
    path = write(tmp_path / "c.csv", CHATBOT_LIKE + "only,two\nok,fine,0\n")
    with pytest.raises(DataError) as err:
        read_corpus(corpus(format="csv", path="c.csv", source_column="Q", target_column="A"), tmp_path)
    assert str(err.value) == f"{path}:6: expected 3 comma-separated fields, found 2"


def test_csv_empty_field_and_header_only(tmp_path):
    path = write(tmp_path / "c.csv", "Q,A\nhi,\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:2: empty target$"):
        read_corpus(corpus(format="csv", path="c.csv", source_column="Q", target_column="A"), tmp_path)
    write(tmp_path / "h.csv", "Q,A\n")
    with pytest.raises(DataError, match=r"h\.csv: no pairs"):
        read_corpus(corpus(format="csv", path="h.csv", source_column="Q", target_column="A"), tmp_path)


def test_missing_file_says_which_data_dir_and_how_it_is_set(tmp_path):
    with pytest.raises(DataError) as err:
        read_corpus(corpus(format="book", path="dlfs2/date.txt"), tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'dlfs2' / 'date.txt'}: no such file")
    assert str(tmp_path) in message and "SEQLAB_DATA" in message and "--data-dir" in message


def test_absolute_paths_ignore_the_data_dir(tmp_path):
    path = write(tmp_path / "p.tsv", "a\tb\n")
    assert read_corpus(corpus(format="tsv", path=str(path)), tmp_path / "elsewhere") == [("a", "b")]


def test_empty_file_has_no_pairs(tmp_path):
    path = write(tmp_path / "p.tsv", "")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: no pairs"):
        read_corpus(corpus(format="tsv", path="p.tsv"), tmp_path)


def test_skip_bad_lines_counts_them_in_one_warning(tmp_path, caplog):
    path = write(tmp_path / "p.tsv", "a\tb\nbad\nc\td\ne\t\nf\tg\th\ni\tj\n")
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        pairs = read_corpus(corpus(format="tsv", path="p.tsv"), tmp_path, skip_bad_lines=True)
    assert pairs == [("a", "b"), ("c", "d"), ("i", "j")]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "skipped 3 bad lines" in warnings[0].getMessage()
    assert f"{path}:2: expected 2 tab-separated fields, found 1" in warnings[0].getMessage()


def test_skip_bad_lines_still_fails_when_nothing_is_left(tmp_path):
    write(tmp_path / "p.txt", "no underscore\nnone here\n")
    with pytest.raises(DataError, match=r"p\.txt: no pairs \(all 2 were bad lines"):
        read_corpus(corpus(format="book", path="p.txt"), tmp_path, skip_bad_lines=True)


def test_task_corpus_is_generated():
    spec = corpus(format="task", task="addition", size=30, seed=5)
    assert read_corpus(spec, Path("/nonexistent")) == generate_addition(30, 5)


# --- splits ------------------------------------------------------------------

PAIRS = [(f"s{i}", f"t{i}") for i in range(100)]


@pytest.mark.parametrize(
    "valid, test, sizes",
    [(10, 20, (70, 10, 20)), (0.1, 0.2, (70, 10, 20)), (0, 5, (95, 0, 5)), (0.29, 0.015, (70, 29, 1)), (1, 0, (99, 1, 0))],
)
def test_split_sizes(valid, test, sizes):
    parts = split_pairs(PAIRS, SplitConfig(valid=valid, test=test, seed=0))
    assert tuple(len(parts[k]) for k in ("train", "valid", "test")) == sizes


def test_split_is_deterministic_disjoint_and_complete():
    split = SplitConfig(valid=10, test=20, seed=7)
    parts = split_pairs(PAIRS, split)
    assert parts == split_pairs(PAIRS, split)
    assert parts != split_pairs(PAIRS, SplitConfig(valid=10, test=20, seed=8))
    seen = [pair for part in parts.values() for pair in part]
    assert sorted(seen) == sorted(PAIRS)
    assert parts["train"] != PAIRS[:70]  # shuffled


def test_split_shares_the_shuffle_across_valid_sizes():
    # test is the tail of one permutation, so it does not move when valid changes.
    assert split_pairs(PAIRS, SplitConfig(valid=0, test=10, seed=1))["test"] == \
        split_pairs(PAIRS, SplitConfig(valid=30, test=10, seed=1))["test"]


@pytest.mark.parametrize(
    "valid, test, message",
    [(50, 50, "no training data"), (80, 30, "no training data"), (2.5, 10, "whole number")],
)
def test_split_errors(valid, test, message):
    with pytest.raises(DataError, match=message):
        split_pairs(PAIRS, SplitConfig(valid=valid, test=test))


def test_negative_split_is_a_config_error():
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        SplitConfig(valid=-0.1, test=10)


def test_load_splits_from_one_corpus():
    cfg = DataConfig(corpus=corpus(format="task", task="date", size=200, seed=0), split=SplitConfig(valid=20, test=0.1))
    parts = load_splits(cfg, Path("/nonexistent"))
    assert [len(parts[k]) for k in ("train", "valid", "test")] == [160, 20, 20]
    assert sorted(sum(parts.values(), [])) == sorted(generate_date(200, 0))


def test_load_splits_from_explicit_files(tmp_path):
    write(tmp_path / "train.tsv", "a\tb\nc\td\n")
    write(tmp_path / "valid.tsv", "e\tf\nbad line\n")
    write(tmp_path / "test.tsv", "g\th\n")
    cfg = DataConfig(train=corpus(format="tsv", path="train.tsv"), valid=corpus(format="tsv", path="valid.tsv"),
                     skip_bad_lines=True)
    assert load_splits(cfg, tmp_path) == {"train": [("a", "b"), ("c", "d")], "valid": [("e", "f")], "test": []}
    cfg = cfg.model_copy(update={"test": corpus(format="tsv", path="test.tsv"), "skip_bad_lines": False})
    splits = load_splits(cfg, tmp_path)
    assert splits["train"] == [("a", "b"), ("c", "d")]  # a split is read when it is asked for, not before
    with pytest.raises(DataError, match=r"valid\.tsv:2: "):
        splits["valid"]


# --- the real corpora (skipped where ../shared/data is absent) ---------------


def test_book_date_split_is_the_books(shared_data):
    cfg = DataConfig(corpus=corpus(format="book", path="dlfs2/date.txt"), split=SplitConfig(valid=0, test=5000, seed=1984))
    parts = load_splits(cfg, shared_data)
    assert [len(parts[k]) for k in ("train", "valid", "test")] == [45_000, 0, 5_000]
    assert parts["test"][:3] == [
        ("10/15/94", "1994-10-15"),
        ("thursday, november 13, 2008", "2008-11-13"),
        ("Mar 25, 2003", "2003-03-25"),
    ]


def test_generated_dates_have_the_shapes_of_the_books(shared_data):
    book = read_corpus(corpus(format="book", path="dlfs2/date.txt"), shared_data)
    book_shapes = {date_shape(source) for source, _ in book}
    assert {date_shape(source) for source, _ in generate_date(5000, seed=0)} == book_shapes
    years = {int(target[:4]) for _, target in book}
    assert (min(years), max(years)) == (1970, 2017)


def test_book_addition(shared_data):
    text = (shared_data / "dlfs2" / "addition.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(text) == 650_000 and all(len(line) == 12 and line[7] == "_" for line in lines)  # S53: 7 + "_" + 4
    assert set("".join(lines)) == set("0123456789+ _")  # the book's 13 symbols
    pairs = read_corpus(corpus(format="book", path="dlfs2/addition.txt"), shared_data)
    assert len(pairs) == 50_000
    assert pairs[0] == ("16+75", "91")
    assert all(target == str(sum(map(int, source.split("+")))) for source, target in pairs)


def test_chatbot_csv(shared_data):
    spec = corpus(format="csv", path="chatbot_ko/ChatbotData.csv", source_column="Q", target_column="A")
    pairs = read_corpus(spec, shared_data)
    assert len(pairs) == 11_823
    assert pairs[0] == ("12시 땡!", "하루가 또 가네요.")
    # The label column (0 everyday, 1 parting, 2 love) is kept: any column can be read, in the same
    # order, for a later classifier. One label in the file is "2   "; fields are stripped.
    labelled = read_corpus(spec.model_copy(update={"target_column": "label"}), shared_data)
    assert [q for q, _ in labelled] == [q for q, _ in pairs]
    assert Counter(label for _, label in labelled) == {"0": 5290, "1": 3570, "2": 2963}


def test_multi30k_aligned_gz(shared_data):
    spec = corpus(format="aligned", source="multi30k/train.de.gz", target="multi30k/train.en.gz")
    pairs = read_corpus(spec, shared_data)
    assert len(pairs) == 29_000
    assert pairs[0] == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Two young, White males are outside near many bushes.",
    )


# --- sentences for word vectors --------------------------------------------------------------


@pytest.mark.parametrize("name", ["corpus.txt", "corpus.txt.gz"])
def test_lines_reader_strips_and_skips_blank_lines(tmp_path, name):
    write(tmp_path / name, "\ufeff  a dog runs \n\n   \nthe cat\r\n")
    assert read_sentences(LinesCorpus(path=name), tmp_path) == ["a dog runs", "the cat"]


def test_lines_reader_errors_name_the_file(tmp_path):
    (tmp_path / "blank.txt").write_text("\n \n")
    with pytest.raises(DataError, match=r"blank\.txt: no sentences"):
        read_sentences(LinesCorpus(path="blank.txt"), tmp_path)
    (tmp_path / "bad.txt").write_bytes(b"fine\nbad \xff\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: not valid UTF-8"):
        read_sentences(LinesCorpus(path="bad.txt"), tmp_path)


def test_pair_corpora_give_both_sides_as_sentences(tmp_path):
    (tmp_path / "pairs.tsv").write_text("hallo welt\thello world\nein hund\ta dog\n")
    assert read_sentences(TsvCorpus(path="pairs.tsv"), tmp_path) == ["hallo welt", "ein hund", "hello world", "a dog"]


def test_a_pair_corpus_is_read_as_its_sentences_are_asked_for(tmp_path):
    """Not whole first (word2vec's data.on_disk streams it): the first source comes before a bad last line is
    read, which is then named as read_corpus names it."""
    (tmp_path / "pairs.tsv").write_text("hallo welt\thello world\nkein tab\n")
    sentences = iter_sentences(TsvCorpus(path="pairs.tsv"), tmp_path)
    assert next(sentences) == "hallo welt"
    with pytest.raises(DataError, match=r"pairs.tsv:2: "):
        next(sentences)


def test_a_split_by_source_keeps_every_source_text_in_one_split():
    # ChatbotData asks the same question with other answers: by source, no valid or test question is a training one
    pairs = [(f"q{i % 37}", f"a{i}") for i in range(100)]  # 37 questions, asked 2 or 3 times each
    split = SplitConfig(valid=10, test=20, seed=3, by="source")
    parts = split_pairs(pairs, split, lambda pair: pair[0])
    questions = {name: {q for q, _ in part} for name, part in parts.items()}
    assert not questions["train"] & questions["valid"] and not questions["train"] & questions["test"]
    assert not questions["valid"] & questions["test"]
    assert sorted(pair for part in parts.values() for pair in part) == sorted(pairs)  # complete
    assert len(parts["test"]) in (20, 21, 22) and len(parts["valid"]) in (10, 11, 12)  # a cut moves back a group
    assert parts == split_pairs(pairs, split, lambda pair: pair[0])  # seeded
    by_item = split_pairs(pairs, split.model_copy(update={"by": "item"}))
    shared = {q for q, _ in by_item["train"]} & {q for q, _ in by_item["test"]}
    assert shared  # what the default does with repeated questions
    assert by_item == split_pairs(pairs, SplitConfig(valid=10, test=20, seed=3))  # item is the default, as before


def _decoded_line_by_line(raw: bytes, keep_ends: bool) -> list[tuple[int, str] | str]:
    """The reference: each line split at ``\\n`` and decoded alone, up to the error message of the first
    bad one."""
    parts = raw.split(b"\n")
    out: list[tuple[int, str] | str] = []
    for lineno, line in enumerate([part + b"\n" for part in parts[:-1]] + [parts[-1]] * bool(parts[-1]), 1):
        if not keep_ends:
            line = line.removesuffix(b"\n").removesuffix(b"\r")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return [*out, f"f:{lineno}: not valid UTF-8 (byte 0x{line[exc.start]:02x} at byte {exc.start + 1} of the "
                                 "line)"]
        out.append((lineno, text.removeprefix("\ufeff") if lineno == 1 else text))
    return out


@pytest.mark.parametrize("keep_ends", [False, True])
def test_lines_decoded_a_block_at_a_time_are_those_decoded_one_by_one(keep_ends, monkeypatch):
    """Blocks of 7 bytes (lines cut across them), \\r\\n and lone \\r, a BOM, no newline at the end, and bad
    UTF-8 (named by its line and byte as before), against decoding each line alone."""
    import io

    import numpy as np

    from seqlab.data import corpus

    monkeypatch.setattr(corpus, "BLOCK_BYTES", 7)
    rng = np.random.default_rng(0)
    pieces = [b"a", b"\xc3\xa9", b"\xea\xb0\x80", b" ", b"\n", b"\r\n", b"\r", b"\xff", b"\xc3", b"\t"]
    for trial in range(300):
        raw = (b"\xef\xbb\xbf" if trial % 5 == 0 else b"") + b"".join(
            pieces[i] for i in rng.choice(len(pieces), int(rng.integers(0, 40)), p=[.3, .1, .1, .1, .15, .05, .02,
                                                                                      .01, .01, .16]))
        expected = _decoded_line_by_line(raw, keep_ends)
        got: list[tuple[int, str] | str] = []
        try:
            got.extend(corpus.decode_lines(io.BytesIO(raw), "f", keep_ends))  # the lines before an error too
        except DataError as exc:
            got.append(str(exc))
        assert got == expected, raw

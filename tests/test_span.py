"""Span extraction (seed 002 §10.1's question answering, S102–S103): the offsets of tokens in the text as given,
SQuAD's exact match and F1 (held against torchmetrics' SQuAD), the SQuAD answerer, and the model trained, evaluated,
used and resumed end to end."""

import json
import random
import unicodedata

import pytest
import torch
from conftest import resumes_exactly, squad_config, squad_json
from tokenizers import models
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.config import ConfigError, parse_config
from seqlab.data import DataError
from seqlab.data.corpus import BadLines
from seqlab.data.squad import read_squad
from seqlab.metrics import answer_f1, normalize_answer, span_scores
from seqlab.model.span import best_spans
from seqlab.predictors.answerer import load
from seqlab.sections import TokenizerConfig
from seqlab.specials import SPECIALS
from seqlab.text import normalize, normalize_with_offsets
from seqlab.tokenizer import Tokenizer, _pipeline

# --- offsets ---------------------------------------------------------------------------------------------------


def _random_text(rng: random.Random) -> str:
    pieces = ["한국어", unicodedata.normalize("NFD", "말씀"), "e\u0301te\u0301", "İstanbul", "Straße", "word", "!", "x"]
    spaces = [" ", "  ", "\n", "\t ", "\u3000", "\xa0"]
    return "".join(rng.choice(spaces) * rng.randint(0, 1) + rng.choice(pieces) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("lowercase", [False, True])
def test_every_normalised_character_knows_the_characters_it_came_from(lowercase):
    rng = random.Random(0)
    for _ in range(300):
        text = _random_text(rng)
        form, spans = normalize_with_offsets(text, lowercase)
        assert form == normalize(text, lowercase) and len(spans) == len(form)
        assert [a for a, _ in spans] == sorted(a for a, _ in spans)  # in order
        runs: dict[tuple[int, int], str] = {}
        for char, span in zip(form, spans):
            runs[span] = runs.get(span, "") + char
        for (a, b), chars in runs.items():
            if chars == " ":  # a run of whitespace: an empty span where the next word starts
                assert a == b and text[a - 1].isspace() and not text[a].isspace()
            else:  # what the span of the given text normalises to is what came from it
                assert normalize(text[a:b], lowercase) == chars


def _seed_tokenizer() -> Tokenizer:
    """A WordPiece tokenizer with the seed's pieces for "1839년 바그너는 괴테의 파우스트을 처음 읽고" (S103); seqlab's
    WordPiece marks a word's first piece with "▁" where the seed's marks the others with "#"."""
    cfg = TokenizerConfig(level="wordpiece")
    tok, _ = _pipeline(cfg, list(SPECIALS))
    pieces = ["▁1839", "년", "▁바", "그", "너", "는", "▁괴", "테", "의", "▁파", "우스", "트", "을", "▁처음", "▁읽고"]
    vocab = {token: i for i, token in enumerate([*SPECIALS, *pieces])}
    tok.model = models.WordPiece(vocab=vocab, unk_token="<unk>", continuing_subword_prefix="")
    return Tokenizer(tok, cfg)


def test_the_seeds_offset_mapping():  # S103
    text = "1839년 바그너는 괴테의 파우스트을 처음 읽고"
    ids, offsets = _seed_tokenizer().encode_offsets([text])[0]
    tokens = _seed_tokenizer().tokens_from_ids(ids)
    seed_tokens = ["1839", "#년", "바", "#그", "#너", "#는", "괴", "#테", "#의", "파", "#우스", "#트", "#을"]
    assert [t.lstrip("▁") for t in tokens[:13]] == [t.lstrip("#") for t in seed_tokens]
    assert offsets[:13] == [(0, 4), (4, 5), (6, 7), (7, 8), (8, 9), (9, 10), (11, 12), (12, 13), (13, 14),
                            (15, 16), (16, 18), (18, 19), (19, 20)]  # the seed's, and its continuation
    assert all(text[a:b] == token.lstrip("▁") for token, (a, b) in zip(tokens, offsets))


@pytest.mark.parametrize("level", ["char", "word", "bpe", "wordpiece"])
def test_token_offsets_point_into_the_text_as_given(level):
    rng = random.Random(1)
    texts = [_random_text(rng) for _ in range(200)]
    tokenizer = Tokenizer.train(texts, TokenizerConfig(level=level, vocab_size=60, lowercase=level == "bpe"))
    for text, (ids, offsets) in zip(texts, tokenizer.encode_offsets(texts)):
        assert ids == tokenizer.encode([text])[0]
        for token, (a, b) in zip(tokenizer.tokens_from_ids(ids), offsets):
            piece = tokenizer.normalize(text[a:b])
            if token == "<unk>":
                assert piece
            elif token.strip("▁ "):
                assert piece == token.lstrip("▁")


def test_morpheme_tokenizers_have_no_offsets():
    tokenizer = Tokenizer.train(["학교에 갔었어요"], TokenizerConfig(level="word", morphemes=True))
    with pytest.raises(ValueError, match="morphemes"):
        tokenizer.encode_offsets(["학교에 갔었어요"])


# --- scores (S102) ---------------------------------------------------------------------------------------------


def test_squads_normalisation_and_f1_on_hand_worked_examples():
    assert normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert answer_f1("Santa Clara, California", "Santa Clara") == pytest.approx(0.8)  # P 2/3, R 1
    assert answer_f1("the", "a") == 1.0  # both empty once normalised
    scores = span_scores(["the Denver Broncos", "Santa Clara, California", "x"],
                         [["Denver Broncos"], ["Levi's Stadium", "Santa Clara"], ["y"]])
    assert scores == pytest.approx({"exact_match": 100 / 3, "f1": 100 * 1.8 / 3})


def test_span_scores_agree_with_torchmetrics_squad():
    squad = pytest.importorskip("torchmetrics.functional.text").squad
    rng = random.Random(2)
    words = ["The", "a", "cat", "Cat,", "sat", "an", "mat.", "on", "the", "hat!", "'s", "1,839"]
    predictions = [" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(300)]
    answers = [[" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(rng.randint(1, 3))] for _ in range(300)]
    theirs = squad([{"prediction_text": p, "id": str(i)} for i, p in enumerate(predictions)],
                   [{"answers": {"text": a, "answer_start": [0] * len(a)}, "id": str(i)} for i, a in enumerate(answers)])
    mine = span_scores(predictions, answers)
    assert 0 < mine["exact_match"] < mine["f1"] < 100
    assert mine["exact_match"] == pytest.approx(float(theirs["exact_match"]), abs=1e-4)
    assert mine["f1"] == pytest.approx(float(theirs["f1"]), abs=1e-4)


def test_the_best_span_starts_before_it_ends_and_is_not_too_long():
    start = torch.log_softmax(torch.tensor([[0.0, 1.0, 5.0, 0.0, 0.0]]), -1)
    end = torch.log_softmax(torch.tensor([[0.0, 4.0, 0.0, 0.0, 3.0]]), -1)  # the best end (1) is before the best start
    s, e, score = best_spans(start, end, longest=5)
    assert (int(s), int(e)) == (2, 4) and float(score) == pytest.approx(float(start[0, 2] + end[0, 4]))
    s, e, _ = best_spans(start, end, longest=2)  # (2, 4) is three tokens long
    assert int(e) - int(s) < 2


# --- the SQuAD answerer ------------------------------------------------------------------------------------------


def _squad(tmp_path, qas, context="Anara was born in 1977."):
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path


def test_squad_files_are_read_question_by_question(tmp_path):
    questions = read_squad(squad_json(tmp_path / "q.json", 5, 0), BadLines(False))
    assert len(questions) == 5
    for q in questions:
        text, start = q.answers[0]
        assert q.context[start:start + len(text)] == text and q.question.endswith("?")


@pytest.mark.parametrize(("qa", "message"), [
    ({"id": "1", "question": "When?", "answers": [{"text": "1978", "answer_start": 18}]},
     "data[0].paragraphs[0].qas[0].answers[0]: '1978' is not the context's text at answer_start 18"),
    ({"id": "1", "question": "When?", "answers": [{"text": "1977", "answer_start": "18"}]},
     "data[0].paragraphs[0].qas[0].answers[0].answer_start: expected a number"),
    ({"id": "1", "question": " ", "answers": [{"text": "1977", "answer_start": 18}]},
     "data[0].paragraphs[0].qas[0].question: empty"),
    ({"id": "1", "question": "When?", "answers": []}, "data[0].paragraphs[0].qas[0].answers: no answer"),
])
def test_a_bad_question_is_named_by_its_file_and_place(tmp_path, qa, message):
    path = _squad(tmp_path, [qa])
    with pytest.raises(DataError) as exc:
        read_squad(path, BadLines(False))
    assert str(exc.value).startswith(f"{path}: {message}")
    good = {"id": "2", "question": "When?", "answers": [{"text": "1977", "answer_start": 18}]}
    bad = BadLines(True)
    assert [q.id for q in read_squad(_squad(tmp_path, [qa, good]), bad)] == ["2"] and bad.count == 1


def test_a_squad_file_may_start_with_a_bom(tmp_path):
    """As the line readers do (Windows editors write one): the BOM is no part of the JSON."""
    plain = squad_json(tmp_path / "q.json", 3, 0)
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_squad(with_bom, BadLines(False)) == read_squad(plain, BadLines(False))


def test_a_file_that_is_not_squad_is_one_line(tmp_path):
    path = tmp_path / "q.json"
    path.write_text('{"data": [')
    with pytest.raises(DataError, match=f"^{path}: not SQuAD JSON"):
        read_squad(path, BadLines(False))
    path.write_text('{"version": "1.1"}')
    with pytest.raises(DataError, match=f"^{path}: data: expected a list"):
        read_squad(path, BadLines(False))


def test_span_models_and_squad_files_go_together(tmp_path):
    raw = squad_config(tmp_path, train=5, valid=5)
    parse_config(raw)
    with pytest.raises(ConfigError, match="data.train: model.type span reads SQuAD files"):
        parse_config(raw | {"model": {"type": "encoder"}})
    with pytest.raises(ConfigError, match="data.valid: model.type span reads SQuAD files"):
        parse_config(raw | {"data": raw["data"] | {"valid": {"format": "tsv", "path": "x.tsv"}}})
    with pytest.raises(ConfigError, match="tokens.source.morphemes"):
        parse_config(raw | {"tokens": {"source": {"level": "word", "morphemes": True}}})


# --- the model, end to end -------------------------------------------------------------------------------------


def test_a_trained_reader_cuts_the_answer_out_of_the_context_as_given(tiny_reader):
    answerer = load(tiny_reader)
    context = "Bon likes  honey.\nThe capital of boraland is haraton.  Anara was born in 1977."
    questions = ["What does Bon like?", "What is the capital of boraland?", "When was Anara born?"]
    answers = answerer.answer(questions, [context] * 3)
    assert [a.text for a in answers] == ["honey", "haraton", "1977"]
    for a in answers:
        assert context[a.start:a.end] == a.text and 0 < a.probability <= 1
        assert a.tokens[0] == "<sos>" and a.tokens.count("<eos>") == 2


def test_the_cls_position_maps_to_no_characters_and_is_never_an_answer(tiny_reader):  # S103: CLS → (0, 0)
    answerer = load(tiny_reader)
    context = "Cyra was born in 2001.  Dagn likes figs."
    (row,) = answerer.encode(["When was Cyra born?"], [context])
    _, _, inside = answerer.batch([row])  # (1, len): the positions that have characters in the context
    assert answerer.tokenizer.tokens_from_ids(row.ids[:1]) == ["<sos>"] and row.first > 1  # [CLS], the question
    assert inside[0].tolist() == [False] * row.first + [True] * len(row.offsets) + [False]
    ((start, end),) = answerer.log_probabilities([row])
    assert start[0] == end[0] == -float("inf")  # the seed's (0, 0): no span of the context, probability 0
    assert all(context[a:b].strip() for a, b in row.offsets)


def test_seqlab_eval_and_answer_on_a_reader_run(tiny_reader):
    result = CliRunner().invoke(app, ["eval", str(tiny_reader), "--split", "valid", "--json"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    assert scores["exact_match"] >= 90 and scores["f1"] >= scores["exact_match"] and scores["questions"] == 60
    result = CliRunner().invoke(app, ["answer", str(tiny_reader), "When was Cyra born?", "--json",
                                      "-c", "Cyra was born in 2001.  Dagn likes figs."])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) | {"probability": 0} == {
        "question": "When was Cyra born?", "answer": "2001", "start": 17, "end": 21, "probability": 0}


def test_a_reader_runs_curves_are_its_loss_exact_match_and_f1(tiny_reader):
    from seqlab.plots import curves_figure
    from seqlab.rundir import RunDir

    figure = curves_figure({"answerer": RunDir(tiny_reader).log()})
    assert [ax.get_title() for ax in figure.axes] == ["loss", "valid exact match (%)", "valid F1 (%)"]


def test_contexts_longer_than_the_input_are_cut_and_their_cut_answers_not_trained_on(tmp_path, caplog):
    from seqlab.rundir import RunDir
    from seqlab.train.family import SpanExtraction

    raw = squad_config(tmp_path, train=50, valid=10)
    raw["data"]["max_source_length"] = 16
    config = parse_config(raw)
    family = SpanExtraction.build(config, RunDir(tmp_path / "run"), None, resume=False)
    assert "contexts were cut to fit data.max_source_length" in caplog.text
    assert all(len(row.ids) <= 16 for row in family.train_set.rows)
    kept = family.train_set.spans[:, 0] >= 0
    assert 0 < kept.sum() < 50 and set(family.trainable) == set(kept.nonzero()[0])
    assert "whose answer was cut off are left out" in family.describe()


def test_a_killed_reader_run_resumes_to_the_same_log(tmp_path, killed_at):
    config = parse_config(squad_config(tmp_path, train=160, valid=20, epochs=2))
    resumes_exactly(config, tmp_path, killed_at, 13)  # inside epoch 2 (10 batches an epoch)

"""``seqlab chat``: a tiny Korean chatbot answers scripted conversations line by line."""

import unicodedata

import pytest
from typer.testing import CliRunner

import seqlab
from seqlab.chat import Chat, EndOfChat
from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.train.trainer import Trainer

PAIRS = [("안녕하세요?", "반가워요!"), ("배고파", "뭐 좀 드세요."), ("잘 자", "좋은 꿈 꾸세요."),
         ("심심해", "같이 놀아요!"), ("고마워", "천만에요.")]


@pytest.fixture(scope="module")
def chatbot(tmp_path_factory):
    """A tiny model that has learned PAIRS by heart (a few seconds of training)."""
    tmp = tmp_path_factory.mktemp("chat")
    tsv = tmp / "pairs.tsv"
    tsv.write_text("".join(f"{q}\t{a}\n" for q, a in PAIRS * 24), encoding="utf-8")
    config = parse_config({
        "data": {"train": {"format": "tsv", "path": str(tsv)}, "valid": {"format": "tsv", "path": str(tsv)},
                 "max_source_length": 16, "max_target_length": 16},
        "tokens": {"shared": True, "source": {"level": "char"}},
        "model": {"d_model": 64, "num_layers": 1, "num_heads": 4, "d_ff": 128, "dropout": 0.0, "max_length": 32},
        "train": {"epochs": 12, "batch_tokens": 200, "warmup": 40, "lr_scale": 0.2, "precision": "fp32",
                  "best_metric": "exact_match"},
        "eval": {"max_output_length": 16},
    })
    run = tmp / "run"
    best = Trainer(config, run, progress=False).fit()
    assert best["valid"]["exact_match"] == 100.0
    return run


def _chat(run, text, *options):
    return CliRunner().invoke(app, ["chat", str(run), *options], input=text)


def test_scripted_chat_answers_every_line(chatbot):
    questions = [q for q, _ in PAIRS] + [""]
    result = _chat(chatbot, "".join(q + "\n" for q in questions))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [a for _, a in PAIRS] + [""]  # an empty line gets an empty reply


def test_korean_typed_in_nfd_gets_the_same_answers(chatbot):
    decomposed = [unicodedata.normalize("NFD", q) for q, _ in PAIRS]
    assert all(d != q for d, (q, _) in zip(decomposed, PAIRS))
    result = _chat(chatbot, "".join(q + "\n" for q in decomposed))
    assert result.stdout.splitlines() == [a for _, a in PAIRS]


def test_switches_are_answered_on_stderr_and_quit_ends(chatbot):
    result = _chat(chatbot, "/beam 3\n배고파\n/sample 0.5\n심심해\n/greedy\n고마워\n/nonsense\n/quit\n잘 자\n")
    assert result.exit_code == 0, result.output
    replies = result.stdout.splitlines()
    assert len(replies) == 3 and replies[2] == "천만에요."  # greedy again; nothing after /quit
    assert "beam search, 3 beams" in result.stderr and "sampling at temperature 0.5" in result.stderr
    assert "greedy decoding" in result.stderr and "not understood: /nonsense" in result.stderr


def test_unseen_punctuation_is_folded_or_left_out(chatbot):
    chat = Chat(seqlab.load(chatbot))
    assert chat.clean("안녕하세요？") == ("안녕하세요?", [])  # full-width question mark -> '?', which it knows
    assert chat.clean("배고파 🍕") == ("배고파", ["🍕"])
    assert chat.reply("배고파 🍕") == ("뭐 좀 드세요.", ["🍕"])
    result = _chat(chatbot, "잘 자 ♥\n")
    assert result.stdout == "좋은 꿈 꾸세요.\n" and "♥" in result.stderr


def test_sampling_differs_across_turns_yet_replays_from_the_seed(chatbot):
    def conversation():
        chat = Chat(seqlab.load(chatbot))
        chat.command("/sample 5")
        return [chat.reply("배고파")[0] for _ in range(6)]

    first = conversation()
    assert first == conversation()
    assert len(set(first)) > 1


def test_quit_and_bad_switches(chatbot):
    chat = Chat(seqlab.load(chatbot))
    with pytest.raises(EndOfChat):
        chat.command("/quit")
    assert chat.command("/beam zero").startswith("not understood")
    assert chat.command("/sample -1").startswith("not understood")
    assert chat.options.beam == 1 and not chat.options.sample

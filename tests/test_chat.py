"""``seqlab chat``: a tiny Korean chatbot answers scripted conversations line by line."""

import unicodedata

import pytest
from conftest import KOREAN_PAIRS as PAIRS
from typer.testing import CliRunner

import seqlab
from seqlab.chat import Chat, EndOfChat
from seqlab.cli import app


def _chat(run, text, *options):
    return CliRunner().invoke(app, ["chat", str(run), *options], input=text)


def test_scripted_chat_answers_every_line(korean_chatbot):
    questions = [q for q, _ in PAIRS] + [""]
    result = _chat(korean_chatbot, "".join(q + "\n" for q in questions))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [a for _, a in PAIRS] + [""]  # an empty line gets an empty reply


def test_korean_typed_in_nfd_gets_the_same_answers(korean_chatbot):
    decomposed = [unicodedata.normalize("NFD", q) for q, _ in PAIRS]
    assert all(d != q for d, (q, _) in zip(decomposed, PAIRS))
    result = _chat(korean_chatbot, "".join(q + "\n" for q in decomposed))
    assert result.stdout.splitlines() == [a for _, a in PAIRS]


def test_switches_are_answered_on_stderr_and_quit_ends(korean_chatbot):
    result = _chat(korean_chatbot, "/beam 3\n배고파\n/sample 0.5\n심심해\n/greedy\n고마워\n/nonsense\n/quit\n잘 자\n")
    assert result.exit_code == 0, result.output
    replies = result.stdout.splitlines()
    assert len(replies) == 3 and replies[2] == "천만에요."  # greedy again; nothing after /quit
    assert "beam search, 3 beams" in result.stderr and "sampling at temperature 0.5" in result.stderr
    assert "greedy decoding" in result.stderr and "not understood: /nonsense" in result.stderr


def test_unseen_punctuation_is_folded_or_left_out(korean_chatbot):
    chat = Chat(seqlab.load(korean_chatbot))
    assert chat.clean("안녕하세요？") == ("안녕하세요?", [])  # full-width question mark -> '?', which it knows
    assert chat.clean("배고파 🍕") == ("배고파", ["🍕"])
    assert chat.reply("배고파 🍕") == ("뭐 좀 드세요.", ["🍕"])
    result = _chat(korean_chatbot, "잘 자 ♥\n")
    assert result.stdout == "좋은 꿈 꾸세요.\n" and "♥" in result.stderr


def test_sampling_differs_across_turns_yet_replays_from_the_seed(korean_chatbot):
    def conversation():
        chat = Chat(seqlab.load(korean_chatbot))
        chat.command("/sample 5")
        return [chat.reply("배고파")[0] for _ in range(6)]

    first = conversation()
    assert first == conversation()
    assert len(set(first)) > 1


def test_quit_and_bad_switches(korean_chatbot):
    chat = Chat(seqlab.load(korean_chatbot))
    with pytest.raises(EndOfChat):
        chat.command("/quit")
    assert chat.command("/beam zero").startswith("not understood")
    assert chat.command("/sample -1").startswith("not understood")
    assert chat.options.beam == 1 and not chat.options.sample

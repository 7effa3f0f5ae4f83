"""Talk to a trained model one line at a time: ``seqlab chat RUN_DIR``.

In a terminal, a prompt with line editing and history (``readline``; the history
is kept in ``~/.seqlab_history``) and these switches:

    /beam N       beam search with N beams (/beam 1 is greedy)
    /greedy       greedy decoding
    /sample [T]   sampling at temperature T (default 1.0)
    /help         this list
    /quit         the end (so does Ctrl-D)

When stdin is not a terminal (a pipe, a file), every input line gets exactly one
output line, so a conversation can be scripted; switches work there too and are
answered on stderr.

Input is made readable for the model first: the tokenizer's normalisation
(Unicode NFC, so Korean typed in NFD becomes whole syllables; single spaces),
then characters the model never saw are folded to their compatibility form
where that one is known (full-width ``？`` → ``?``, ``…`` → ``...``, ``ｋ`` → ``k``),
and what is still unknown is dropped with a note on stderr, rather than fed to
the model as ``<unk>``, which it rarely saw in training.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from seqlab.decoding import DecodeOptions
from seqlab.predictors.translator import Translator

HISTORY = Path.home() / ".seqlab_history"
HELP = "/beam N · /greedy · /sample [T] · /help · /quit"


class EndOfChat(Exception):
    pass


class Chat:
    """A conversation with one model: the decoding options in force and the number of turns so far."""

    def __init__(self, translator: Translator, options: DecodeOptions | None = None) -> None:
        self.translator = translator
        self.options = options or DecodeOptions()
        self.turns = 0

    def clean(self, text: str) -> tuple[str, list[str]]:
        """The input as the model can read it, and the characters dropped from it."""
        tokenizer = self.translator.source
        text = tokenizer.normalize(text)
        unknown = tokenizer.unknown_characters(text)
        if unknown:
            text = tokenizer.normalize("".join(unicodedata.normalize("NFKC", c) if c in unknown else c for c in text))
            unknown = tokenizer.unknown_characters(text)
            text = tokenizer.normalize("".join(c for c in text if c not in unknown))
        return text, unknown

    def reply(self, text: str) -> tuple[str, list[str]]:
        """The model's answer to one input line, and the characters dropped from the input."""
        text, dropped = self.clean(text)
        if not text:
            return "", dropped
        self.turns += 1
        options = self.options
        if options.sample:  # a new draw every turn, reproducible from the starting seed
            options = options.model_copy(update={"seed": options.seed + self.turns - 1})
        return self.translator.translate([text], options)[0], dropped

    def command(self, line: str) -> str:
        """Carry out a /switch; returns what to tell the user. /quit raises EndOfChat."""
        name, *args = line[1:].split()
        try:
            if name in ("quit", "exit", "q"):
                raise EndOfChat
            if name == "help":
                return HELP
            if name == "greedy" and not args:
                self.options = self.options.model_copy(update={"beam": 1, "nbest": 1, "sample": False})
                return "greedy decoding"
            if name == "beam" and len(args) == 1 and int(args[0]) >= 1:
                self.options = self.options.model_copy(update={"beam": int(args[0]), "nbest": 1, "sample": False})
                return f"beam search, {args[0]} beams" if int(args[0]) > 1 else "greedy decoding"
            if name == "sample" and len(args) <= 1:
                temperature = float(args[0]) if args else 1.0
                if temperature < 0:
                    raise ValueError
                self.options = self.options.model_copy(update={"beam": 1, "nbest": 1, "sample": True,
                                                               "temperature": temperature})
                return f"sampling at temperature {temperature:g}"
        except ValueError:
            pass
        return f"not understood: {line.strip()} ({HELP})"


def converse(chat: Chat, lines: Iterable[str], out: TextIO, err: TextIO) -> None:
    """Answer every line (one output line each); switches are answered on ``err``."""
    for line in lines:
        if line.strip().startswith("/"):
            try:
                print(chat.command(line.strip()), file=err, flush=True)
            except EndOfChat:
                return
            continue
        answer, dropped = chat.reply(line)
        if dropped:
            print(f"(left out, never seen in training: {' '.join(dropped)})", file=err, flush=True)
        print(answer, file=out, flush=True)


def terminal_lines(prompt: str = "> ") -> Iterable[str]:
    """Lines typed at a prompt, with readline's editing and a history kept across sessions."""
    try:
        import readline
    except ImportError:  # not on every platform; input() still works without it
        readline = None  # type: ignore[assignment]
    if readline is not None:
        try:
            readline.read_history_file(HISTORY)
        except OSError:
            pass
    try:
        while True:
            try:
                yield input(prompt)
            except EOFError:
                print(file=sys.stdout)
                return
    finally:
        if readline is not None:
            try:
                readline.write_history_file(HISTORY)
            except OSError:
                pass

"""The ``seqlab`` command, one module per command group:

* ``train.py``: ``seqlab train``, ``seqlab pretrain``, ``seqlab eval`` (make a run, score it on a split);
* ``use.py``: ``seqlab translate``, ``seqlab chat``, ``seqlab serve`` (use a trained run);
* ``lm.py``: ``seqlab generate``, ``seqlab score`` (use a language model);
* ``classify.py``: ``seqlab classify``, ``seqlab fill-mask``, ``seqlab answer`` (use a classifier, a pretrained
  BERT, a span extractor);
* ``vectors.py``: ``seqlab vectors train | similar | analogy | eval | export`` (word vectors);
* ``data.py``: ``seqlab data fetch``;  ``plot.py``: ``seqlab plot attention | pe | lr | curves | vectors``;
* ``common.py``: option types, the decoding options (declared once), errors and logging.

The commands that use one kind of model (``translate``, ``generate``, ``classify``, ``vectors``, ...) are the ones
its ``Kind`` lists (``seqlab.kinds``, looked up through ``seqlab.registry``); the rest work on a run of any kind.

Commands import what they need when they run, so ``seqlab --help`` starts without torch.
"""

from __future__ import annotations

import atexit
import gc

import typer
from typer.models import DefaultPlaceholder

from seqlab.cli import data, plot, train, use
from seqlab.registry import kinds

# A command's last act: the interpreter's final garbage collection walks every object torch made (a second or more
# of each command's exit) though the process is ending; frozen at exit, they are left to the operating system.
atexit.register(gc.freeze)

def make_app() -> typer.Typer:
    """The ``seqlab`` command: the commands for runs of any kind, then each registered kind's own."""
    app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="Sequence models on the CPU: word vectors, language models, seq2seq, classifiers.")
    app.command()(train.train)
    app.command()(train.pretrain)
    app.command("eval")(train.evaluate_run)
    app.command()(train.average)
    app.command()(use.serve)
    for kind in kinds():  # each kind's own commands (``Kind.commands``): translate, generate, classify, ...
        for name, command in kind.commands():
            if isinstance(command, typer.Typer):
                app.add_typer(command, name=name)
            else:
                app.command(name)(command)
    app.add_typer(data.app, name="data")
    app.add_typer(plot.app, name="plot")
    one_line_help(app)
    return app


def one_line_help(typer_app: typer.Typer) -> None:
    """``seqlab --help`` (and each group's) lists a command with the first sentence of its docstring; the whole
    docstring is the command's own ``--help``."""
    for info in typer_app.registered_commands:
        if info.short_help is None and info.callback is not None:
            info.short_help = first_sentence(info.callback.__doc__ or "")
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            if isinstance(group.short_help, DefaultPlaceholder) or group.short_help is None:
                group.short_help = first_sentence(str(group.typer_instance.info.help or ""))
            one_line_help(group.typer_instance)


def first_sentence(text: str) -> str:
    """The text up to the end of its first sentence, on one line."""
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


app = make_app()

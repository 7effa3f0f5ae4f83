"""The ``seqlab`` command, one module per command group:

* ``train.py``: ``seqlab train``, ``seqlab eval`` (make a run, score it on a split);
* ``use.py``: ``seqlab translate``, ``seqlab chat``, ``seqlab serve`` (use a trained run);
* ``data.py``: ``seqlab data fetch``;  ``plot.py``: ``seqlab plot attention | pe | lr | curves``;
* ``common.py``: option types, the decoding options (declared once), errors and logging.

Commands import what they need when they run, so ``seqlab --help`` starts without torch.
"""

from __future__ import annotations

import typer

from seqlab.cli import data, plot, train, use

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sequence-to-sequence learning on the CPU.")
app.command()(train.train)
app.command("eval")(train.evaluate_run)
app.command()(use.translate)
app.command()(use.chat)
app.command()(use.serve)
app.add_typer(data.app, name="data")
app.add_typer(plot.app, name="plot")

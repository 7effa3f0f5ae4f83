"""``CallbackAny2Vec``: what gensim calls around each epoch."""

from __future__ import annotations

from typing import Any


class CallbackAny2Vec:
    def on_epoch_begin(self, model: Any) -> None:
        """Called before each epoch."""

    def on_epoch_end(self, model: Any) -> None:
        """Called after each epoch."""

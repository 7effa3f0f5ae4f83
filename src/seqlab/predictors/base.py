"""What every trained model does when it is used: load from its run directory, run as its ``Runtime`` says, keep
blank inputs aligned with empty outputs, and cut inputs longer than it reads (saying so).

``Predictor`` is that common part; a subclass per kind of model (``Translator``, ``LanguageModel``,
``Classifier``, ``MaskedLanguageModel``, ``Answerer``) holds only its own: how its model is built from the run, how
text becomes its input, and what its outputs are. Training-time validation, ``seqlab eval``, the CLI, the server
and Python all go through them, so the same input always gives the same output.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import torch
from torch import nn

from seqlab import precision
from seqlab.config import Config
from seqlab.data.inputs import around_blanks, check_texts, chunks, truncate
from seqlab.decoding import Cancelled, DecodeOptions
from seqlab.model import device_of, evaluating
from seqlab.registry import expect_kind
from seqlab.rundir import NGRAMS, RunDir, RunFileError
from seqlab.runtime import Runtime, collector_paused
from seqlab.tokenizer import Tokenizer

# A search's precision is timed on its encoder and first steps, where every row of the batch is still decoding. The
# first call at beam 5 over 256 Multi30k sentences took 30.6 s where the probe ran whole searches, 16.6-17.2 s with
# 8 steps, 9.0-9.7 s with 4 (AMX Xeon, 2 cores; its own search of the batch included), each choosing bf16 (0.73-0.92×
# fp32's time); the date model's probes chose fp32 with 4 steps as with whole searches (1.15-1.21×).
PROBE_DECODING_STEPS = 4
T = TypeVar("T")
P = TypeVar("P", bound="Predictor")
TP = TypeVar("TP", bound="TextPredictor")


class Predictor:
    """A trained model, its config and its runtime (where it runs, and in what precision).

    ``runtime``: resolved by whoever placed the model (the trainer, ``load``); by default, what the run's
    ``train.precision`` means on the device the model's weights are on."""

    model: Any  # each kind's module, or an exported graph's stand-in
    kind: ClassVar[str]  # the kind of run it loads (``seqlab.registry``)

    def __init__(self, model: Any, config: Config, runtime: Runtime | None = None) -> None:
        self.model = model
        self.config = config
        if runtime is None:
            where = device_of(model)
            runtime = Runtime(where, precision.resolve(config.train.precision, where.type))
        self.runtime = runtime

    def run_search(self) -> dict[str, Any]:
        """The search this run decodes with where a call gives none: its config's ``eval.beam`` and
        ``eval.length_penalty`` (``DecodeOptions.or_run_search``'s arguments; the page opens on it)."""
        return {"beam": self.config.eval.beam, "length_penalty": self.config.eval.length_penalty}

    def decoding(self, options: DecodeOptions | None = None, **kwargs: Any) -> DecodeOptions:
        """The options a search runs with: ``options`` or the keyword options (not both), what they leave open
        filled with the run's own search (``run_search``)."""
        if options is not None and kwargs:
            raise TypeError("pass DecodeOptions or keyword options, not both")
        chosen = options or DecodeOptions(**kwargs)
        return chosen.or_run_search(**self.run_search())

    @property
    def device(self) -> torch.device:
        """Where the model runs; its inputs go there."""
        return self.runtime.device

    def autocast(self, rows: int | None = None, tokens: int | None = None) -> contextlib.AbstractContextManager:
        """Autocast in the runtime's precision (a no-op in fp32; ``rows``: a search's, ``tokens``: one pass's,
        ``Runtime.autocast``)."""
        return self.runtime.autocast(rows, tokens)

    @classmethod
    def load(cls: type[P], run_dir: str | Path, device: str | None = None, precision: str | None = None,
             int8: bool = False, workers: int = 1) -> P:
        """The model of a run directory, ready to use. It runs where and as it trained (``train.device``,
        ``train.precision``, each as this machine has it; a run of another kind is a ValueError that says which
        commands use it) unless ``device`` (``auto``, ``cpu``, ``cuda``) or
        ``precision`` (``auto``, ``bf16``, ``fp32``) say otherwise; ``int8``: its linear layers quantised to int8
        (``runtime.quantize_int8``), for faster CPU decoding of large models; ``workers``: batches computed side by
        side, each on its share of the threads (``Runtime.map``; every kind's batches: translations, continuations,
        classes, spans)."""
        run = RunDir(run_dir)
        config = run.config()  # a word-vector run is refused here, saying what to use instead
        expect_kind(run.path, cls.kind)
        train = config.train
        trained = run.model_info().get("precision")  # what auto measured when the run trained; absent in older runs
        return cls.from_run(run, config, Runtime.for_inference(device or train.device, precision or train.precision,
                                                               int8, trained, workers))

    @classmethod
    def from_run(cls: type[P], run: RunDir, config: Config, runtime: Runtime) -> P:
        """Build the kind's model from ``run`` (its tokenizers, its weights), placed by ``runtime``."""
        raise NotImplementedError

    def batched(self, lengths: Sequence[int], work: Callable[[list[int]], T]) -> list[tuple[list[int], T]]:
        """``work`` over the inputs (given by their ``lengths``) in batches of similar length, the model in eval
        mode: ``eval.batch_size`` inputs a batch (fewer with workers: ``Runtime.batch_size``), the longest batch first
        (with workers side by side, the short ones at the end fill the gaps the long ones leave), as many at once as
        the runtime's ``workers`` (``Runtime.map``). Each batch's input indices with what ``work`` made of them.
        ``work`` runs on a worker's thread: what torch keeps per thread (grad mode, autocast) it sets itself."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        batches = list(chunks(order, self.runtime.batch_size(len(order), self.config.eval.batch_size)))[::-1]
        with evaluating(self.model):
            return list(zip(batches, self.runtime.map(work, batches)))

    def search_runtime(self, batch: list[int], options: DecodeOptions,
                       search: Callable[[Runtime, list[int], Callable[[], bool]], object]) -> Runtime:
        """The runtime a call's searches run in (``Runtime.searching``): where ``auto`` measures, the faster
        precision for this model, its strategy (beam search or sampling, rows per input) and batches of about
        ``batch``'s size, timed the first time on this machine by ``search(runtime, batch, stop)`` (the model in
        eval mode, no gradients), which ``stop`` ends after the encoder and ``PROBE_DECODING_STEPS`` steps."""
        def probe(runtime: Runtime) -> int:
            asked = itertools.count()  # stop() is asked before the encoder and before every step
            with evaluating(self.model), torch.no_grad(), contextlib.suppress(Cancelled):
                search(runtime, batch, lambda: next(asked) > PROBE_DECODING_STEPS)
            return len(batch)

        key = {"kind": self.kind, "model": self.config.model.model_dump(mode="json"),  # what a step costs: not
               "sample": options.sample, "rows_per_input": options.rows_per_input}  # a length penalty or a seed
        return self.runtime.searching(len(batch) * options.rows_per_input, probe, key)

    @staticmethod
    def each_text(texts: Sequence[str], work: Callable[[list[str]], list[T]], empty: T, caller: str) -> list[T]:
        """``work`` over the texts that are not blank, each empty or whitespace-only text getting ``empty`` in its
        place; one string instead of a list is a TypeError naming ``caller``."""
        check_texts(texts, caller)
        with collector_paused():  # the texts' ids and the outputs made of them, around ``Runtime.map``'s batches
            return around_blanks(texts, work, empty)

    @staticmethod
    def cut(encoded: list[list[int]], limit: int, what: str) -> tuple[list[list[int]], list[bool]]:
        """Each id list cut to ``limit`` tokens (a warning counts the ``what`` that were), and whether it was."""
        return truncate(encoded, limit, what), [len(ids) > limit for ids in encoded]


class TextPredictor(Predictor):
    """A predictor that reads text with one tokenizer (a language model, a pretrained BERT, a span extractor): its
    model is built from the config and the tokenizer's vocabulary (``build``), the rest of ``from_run`` is shared."""

    def __init__(self, model: Any, tokenizer: Tokenizer, config: Config, runtime: Runtime | None = None) -> None:
        super().__init__(model, config, runtime)
        self.tokenizer = tokenizer

    @classmethod
    def build(cls, config: Config, vocab_size: int) -> nn.Module:
        """The kind's model, untrained, for ``config.model`` and a vocabulary of ``vocab_size``."""
        raise NotImplementedError

    @classmethod
    def from_run(cls: type[TP], run: RunDir, config: Config, runtime: Runtime) -> TP:
        tokenizer, _ = run.tokenizers()
        model = cls.build(config, tokenizer.vocab_size)
        run.load_model(model)
        return cls(runtime.place(model), tokenizer, config, runtime)


class NgramModel(Protocol):
    """What ``model.ngrams`` fits beside a network (``NgramHead``, ``KneserNey``): saved as its state, rebuilt
    from it."""

    fit_seconds: float

    @classmethod
    def from_state(cls, cfg: Any, arrays: dict[str, Any], metadata: dict[str, Any]) -> Any: ...

    def state(self) -> tuple[dict[str, Any], dict[str, str]]: ...

    def describe(self) -> str: ...


N = TypeVar("N", bound=NgramModel)


def saved_ngrams(run: RunDir, model: type[N], cfg: Any) -> N:
    """The n-gram model ``run`` saved beside its network, as ``model`` rebuilds it for ``cfg`` (``model.ngrams``);
    one that does not fit ``cfg`` is a ``RunFileError`` naming its file."""
    arrays, metadata = run.ngrams()
    try:
        return model.from_state(cfg, arrays, metadata)
    except (ValueError, KeyError) as exc:
        raise RunFileError(f"{run.path / NGRAMS}: not the n-gram model of this model.ngrams ({exc})") from None

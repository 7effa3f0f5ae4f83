"""The kinds of model seqlab trains and uses, looked up by name, by config or by run directory.

A kind (seq2seq, language model, classifier, pretrained BERT, span extractor, word vectors) is one module of
``seqlab.kinds`` that declares everything about it in one ``Kind``: the ``model.type`` values of its configs, the
command that trains it, its training family, its predictor, what ``seqlab eval`` scores, what ``seqlab serve``
shows, and its own commands. Nothing else branches on the kind: the trainer, ``seqlab eval``, the server and the
CLI ask this registry, which knows no kind itself.

``seqlab.kinds`` registers the built-in kinds when it is imported, which the first lookup does (the one import
of this module that points up, and it is a name, not a statement: a kind's module sits above everything it
declares). Another kind is one module of its own that calls ``register`` (tests/test_kinds.py defines one outside
seqlab and trains, evaluates, serves and uses it through the registry alone).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

BUILT_IN = "seqlab.kinds"
CONFIG = "config.yaml"  # a run directory's config (rundir.CONFIG, which sits above this module)
_KINDS: dict[str, Kind] = {}


@dataclass(frozen=True)
class InferenceOptions:
    """How a user asks a loaded run to run (``seqlab eval``, ``translate``, ``serve``...; ``Kind.load``): on which
    engine (seqlab's own, ``torch``; a seq2seq model's ``seqlab export`` directory on ``ct2`` or ``onnx``), with
    int8 linear layers or not (seqlab's own engine), and on how many batches side by side (``workers``). The
    predictor resolves it on the machine once (``Runtime.for_inference``) and hands the runtime down."""

    engine: str = "torch"
    int8: bool = False
    workers: int = 1


class Kind:
    """One kind of model: what it is called, which runs are its own, and its parts. A kind's module subclasses it
    and registers one instance; the parts are methods, which import what they return when asked (so that
    ``seqlab --help`` reads the kinds without loading PyTorch)."""

    name: ClassVar[str]  # as the registry knows it
    noun: ClassVar[str]  # what a run of it is, in an error: "a language model"
    use: ClassVar[str]  # the commands that use its runs, in an error: "seqlab generate or seqlab score"
    model_types: ClassVar[tuple[str, ...]] = ()  # the ``model.type`` values of its configs
    trained_by: ClassVar[str] = "train"  # the seqlab command that makes its runs
    formats: ClassVar[tuple[str, ...]] = ()  # the ``data`` corpus formats it reads (seqlab.corpora)
    metrics: ClassVar[tuple[str, ...]] = ("loss",)  # the valid scores that may pick its best model
    best_metric: ClassVar[str] = "loss"  # the one that does unless ``train.best_metric`` says
    shapes_sources: ClassVar[bool] = False  # whether ``data.source_eos`` / ``data.source_width`` apply to it
    prepares: ClassVar[bool] = False  # whether its family has ``prepare`` (``seqlab data prepare``, data.prepared)
    cleans: ClassVar[bool] = False  # whether its training pairs are cleaned by data.clean (source and target texts)

    def sections(self) -> dict[str, type[Any]]:
        """Its configs' ``model`` sections (``seqlab.config.ModelSection`` subclasses), by ``model.type``."""
        return {}

    def owns(self, run_dir: Path) -> bool:
        """Whether the run in ``run_dir``, whose config has no model section, is of this kind (a run with a model
        section is its ``model.type``'s kind)."""
        return False

    def family(self) -> Any:
        """The training family (``seqlab.train.family.base.Family``) whose ``build`` makes a run's model, batches
        and validation."""
        raise ValueError(f"{self.noun} is not trained by seqlab train: use seqlab {self.trained_by}")

    def predictor(self) -> Any:
        """The predictor class (``seqlab.predictors``) that loads its runs."""
        raise NotImplementedError

    def page(self) -> Any:
        """The module of ``seqlab.server`` with its ``/api/info`` (``info``) and routes (``add_routes``), or None
        where its runs have no page."""
        return None

    def load(self, run_dir: Path, how: InferenceOptions = InferenceOptions()) -> Any:  # noqa: B008 (frozen)
        """The run's predictor, ready to use, run as ``how`` asks (only seq2seq models have other engines)."""
        if how.engine != "torch":
            raise ValueError(f"{run_dir}: {self.noun} runs on seqlab's own engine only, not {how.engine} (the "
                             "engines of seqlab export are for seq2seq models)")
        return self.predictor().load(run_dir, int8=how.int8, workers=how.workers)

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """``seqlab eval``'s metrics of the run on ``split`` (``options``: the decoding options, where it decodes;
        ``how``: how the model runs)."""
        raise ValueError(f"{run_dir}: {self.noun} has no seqlab eval")

    def serve(self, run_dir: Path, limits: Any,
              how: InferenceOptions = InferenceOptions()) -> tuple[dict[str, Any], Callable[[Any, Any], None]]:  # noqa: B008
        """What ``seqlab serve`` shows of the run: its ``/api/info`` and a function that adds the kind's routes to
        the app (given the app and its worker), both from its ``page``."""
        page = self.page()
        if page is None:
            raise ValueError(f"{run_dir}: {self.noun} has no page: use {self.use}")
        predictor = self.load(run_dir, how)
        return page.info(run_dir, predictor, limits), lambda app, worker: page.add_routes(app, worker, predictor)

    def commands(self) -> list[tuple[str, Callable[..., Any]]]:
        """The kind's own CLI commands (name, function): how a user uses its runs."""
        return []


def register(kind: Kind) -> Kind:
    """Add a kind; its name and its ``model.type`` values must be new."""
    taken = {t for other in _KINDS.values() for t in other.model_types} & set(kind.model_types)
    if kind.name in _KINDS or taken:
        raise ValueError(f"kind {kind.name!r}: {'the name' if kind.name in _KINDS else 'model.type ' + ', '.join(taken)}"
                         " is taken by another kind")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> list[Kind]:
    """Every kind, the built-in ones first, in the order they registered."""
    _load_built_in()
    return list(_KINDS.values())


def kind_named(name: str) -> Kind:
    _load_built_in()
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"no kind {name!r} (kinds: {', '.join(_KINDS)})") from None


def kind_of_type(model_type: str) -> Kind:
    """The kind whose configs have this ``model.type``."""
    for kind in kinds():
        if model_type in kind.model_types:
            return kind
    raise ValueError(f"model.type {model_type!r} is no kind's (types: {', '.join(all_model_types())})")


def kind_of_run(run_dir: str | Path) -> Kind:
    """The kind of the run in ``run_dir``: its config's ``model.type``'s, or for a run without a model section the
    first kind that ``owns`` it."""
    run_dir = Path(run_dir)
    found = model_type(run_dir)
    for kind in kinds():
        if found in kind.model_types or kind.owns(run_dir):
            return kind
    if not (run_dir / CONFIG).exists():
        raise FileNotFoundError(f"{run_dir}: no run here (no {CONFIG})")
    raise ValueError(f"{run_dir / CONFIG}: a run of no kind seqlab knows (model.type {found})")


def model_type(run_dir: Path) -> str | None:
    """The ``model.type`` of the run's saved config (``transformer`` where its model section names none); None
    where it has no config, or no model section (the file is read again, and checked, by whatever loads the
    run)."""
    try:
        config = yaml.safe_load((run_dir / CONFIG).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"{run_dir / CONFIG}: not a seqlab config ({exc})") from None
    model = config.get("model") if isinstance(config, dict) else None
    return model.get("type", "transformer") if isinstance(model, dict) else None


def expect_kind(run_dir: str | Path, name: str) -> Kind:
    """The kind of the run in ``run_dir``, which must be the kind ``name``: else a ValueError that says what the
    run holds and which commands use it."""
    kind = kind_of_run(run_dir)
    if kind.name != name:
        raise ValueError(f"{run_dir}: {kind.noun}, not {kind_named(name).noun}: use {kind.use}")
    return kind


def model_sections() -> dict[str, type[Any]]:
    """Every kind's ``model`` sections by ``model.type``: what ``seqlab.config.Config.model`` may be."""
    sections: dict[str, type[Any]] = {}
    for kind in kinds():
        declared = kind.sections()
        if set(declared) != set(kind.model_types):
            raise ValueError(f"kind {kind.name!r}: its sections are for {sorted(declared)}, its model_types "
                             f"{sorted(kind.model_types)}")
        sections |= declared
    return sections


def all_model_types() -> list[str]:
    return [t for kind in kinds() for t in kind.model_types]


def _load_built_in() -> None:
    importlib.import_module(BUILT_IN)  # once; after that a look-up in sys.modules

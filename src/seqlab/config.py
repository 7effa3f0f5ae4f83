"""Typed run configuration, loaded from YAML with dotted ``--set`` overrides.

``Config`` is the top level: its data section (``seqlab.corpora``), tokens, train and eval sections
(``seqlab.sections``) and model section, one class per ``model.type`` beside its model and declared by its kind
(``ModelSection``). Every section is a pydantic model that forbids unknown keys, so a misspelt
key is an error that names it (never silently ignored, cf. fairseq #4675), and
refuses NaN and infinity in its floats. The resolved configuration is saved in
the run directory and is all that is needed, together with the data directory,
to rebuild a run's data. Whatever a config file or a ``--set`` holds, loading it
ends in the config or in a ``ConfigError`` that names the file (or the ``--set``)
on one line, or that lists one ``key: problem`` line per problem.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args, overload

import yaml
from pydantic import BaseModel, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from seqlab import registry
from seqlab.corpora import FORMATS, CleanConfig, DataConfig, TextCorpus
from seqlab.sections import EvalConfig, Section, TokensConfig, TrainConfig


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the file and key."""


# --- model -------------------------------------------------------------------


class ModelSection(Section):
    """The ``model`` section. Each ``model.type`` has its own subclass, declared beside its model (as nanoGPT's
    GPTConfig sits over GPT: ``seqlab.model.transformer.TransformerConfig``, ...) and made known by its kind
    (``seqlab.registry.Kind.sections``); what it needs of the rest of the config it checks itself."""

    type: str

    def check(self, config: Config) -> None:
        """Raise a ValueError naming the keys where this model and the rest of ``config`` disagree."""

    def describe(self) -> str:
        """One line on the model's shape, as the page heads it (``/api/info``'s ``shape``)."""
        return f"{self.type} model"

    def numpy_needs(self) -> list[str]:
        """What ``train.engine: numpy`` needs of this model that it lacks: seqlab.scratch has twins of the book's
        RNN language models and of its one-layer LSTM seq2seq models only."""
        return ["model.type lm or rnn"]


DEFAULT_MODEL = "transformer"  # the model.type of a config that names none: the seeds' Transformer


def _model_type(value: Any) -> str:
    """The ``model.type`` that a model section's raw value names."""
    return value.get("type", DEFAULT_MODEL) if isinstance(value, dict) else getattr(value, "type", DEFAULT_MODEL)


def _default_model() -> ModelSection:
    """The model section of a config that has none: the default type's, all its keys at their defaults."""
    section: type[ModelSection] = registry.model_sections()[DEFAULT_MODEL]
    return section.model_validate({})


class Config(Section):
    seed: int = 1
    data: DataConfig
    tokens: TokensConfig = TokensConfig()
    model: SerializeAsAny[ModelSection] = Field(default_factory=_default_model)
    train: TrainConfig = TrainConfig()
    eval: EvalConfig = EvalConfig()

    @field_validator("model", mode="before")
    @classmethod
    def _section(cls, value: Any) -> Any:
        """The section of the ``model.type`` that ``value`` names, as its kind declares it (``registry``); its
        problems are located under the type, as ``model.rnn.hidden_size``."""
        if isinstance(value, ModelSection):
            return value
        model_type, sections = _model_type(value), registry.model_sections()
        if model_type not in sections:
            raise ValueError(f"model.type {model_type!r} is no kind's (the types: {', '.join(sections)})")
        try:
            return sections[model_type].model_validate(value)
        except ValidationError as exc:
            raise ValidationError.from_exception_data(exc.title, [
                {"type": e["type"], "loc": (model_type, *e["loc"]), "input": e["input"], "ctx": e.get("ctx", {})}
                for e in exc.errors()]) from None

    @property
    def kind(self) -> registry.Kind:
        """The kind of model this config trains (``seqlab.registry``)."""
        return registry.kind_of_type(self.model.type)

    @property
    def best_metric(self) -> str:
        """The valid score that picks the best model: ``train.best_metric``, else the kind's."""
        return self.train.best_metric or self.kind.best_metric

    @model_validator(mode="after")
    def _fits(self) -> Config:
        kind = self.kind
        self._engine()
        if kind.shapes_sources:
            self._source_width()
        else:
            self._plain_sources()
        self._corpora(kind)
        if self.data.clean != CleanConfig() and not kind.cleans:
            able = " or ".join(k.noun for k in registry.kinds() if k.cleans)
            raise ValueError(f"data.clean: {kind.noun} reads no pairs of texts to clean; it cleans those of {able}")
        if self.data.prepared is not None and not kind.prepares:
            able = " or ".join(k.noun for k in registry.kinds() if k.prepares)
            raise ValueError(f"data.prepared: {kind.noun} reads its corpus itself; prepared directories are for {able}")
        if self.train.best_metric not in (None, *kind.metrics):
            who = (f"{kind.noun} is picked by its valid {kind.metrics[0]}" if len(kind.metrics) == 1
                   else f"model.type {self.model.type} is picked by {', '.join(kind.metrics)}")
            raise ValueError(f"train.best_metric: {who}, not {self.train.best_metric}")
        self.model.check(self)
        return self

    def _engine(self) -> None:
        """train.engine numpy trains what seqlab.scratch has a twin of (train/numpy_engine.py)."""
        if self.train.engine == "torch":
            return
        needs = self.model.numpy_needs()
        if self.train.label_smoothing > 0:
            needs.append("train.label_smoothing 0")
        if self.train.accumulate > 1:
            needs.append("train.accumulate 1 (one process, one batch a step)")
        if self.train.device == "cuda":
            needs.append("train.device auto or cpu (NumPy computes on the CPU)")
        if needs:
            raise ValueError(f"train.engine numpy needs {', '.join(needs)}")

    def _plain_sources(self) -> None:
        """data.source_eos / data.source_width / data.target_width shape a seq2seq model's inputs and outputs, and
        only its."""
        data = self.data
        if not data.source_eos or data.source_width is not None or data.target_width is not None:
            raise ValueError("data.source_eos, data.source_width and data.target_width shape a seq2seq model's "
                             f"sources and targets (model.type rnn or transformer), not model.type {self.model.type}'s")

    def _corpora(self, kind: registry.Kind) -> None:
        """Every corpus is of a format the kind reads."""
        for name, corpus in self._named_corpora():
            if corpus.format in kind.formats:
                continue
            self.refuse_lines()
            only = [k for k in registry.kinds() if k.formats == (corpus.format,)] + [kind]  # a kind of one format
            fmt = only[0].formats[0] if len(only[0].formats) == 1 else corpus.format
            raise ValueError(f"data.{name}: model.type {' or '.join(only[0].model_types)} reads {FORMATS[fmt]} "
                             f"(format {fmt}), and only it does")

    def _named_corpora(self) -> list[tuple[str, TextCorpus]]:
        named = [(name, getattr(self.data, name)) for name in ("corpus", "train", "valid", "test")]
        return [(name, corpus) for name, corpus in named if corpus is not None]

    def refuse_lines(self) -> None:
        """A lines corpus holds sentences: refused for a model that reads pairs."""
        for name, corpus in self._named_corpora():
            if corpus.format == "lines":
                raise ValueError(f"data.{name}: a lines corpus holds sentences, not pairs; only language models "
                                 "(model.type lm, transformer_lm, bert without next_sentence) read it")

    def _source_width(self) -> None:
        """A seq2seq model's fixed-width sources fit."""
        data = self.data
        if data.source_width is not None and self.tokens.source.level != "char":
            raise ValueError("data.source_width pads with the space character: it needs tokens.source.level char")
        if data.source_width is not None and data.source_width + data.source_eos > data.max_source_length:
            raise ValueError(f"data.max_source_length ({data.max_source_length}) must cover data.source_width "
                             f"({data.source_width}){' and <eos>' if data.source_eos else ''}")
        target_level = (self.tokens.source if self.tokens.shared else self.tokens.target).level
        if data.target_width is not None and target_level != "char":
            raise ValueError("data.target_width pads with the space character: it needs character targets "
                             "(tokens.target.level char, or tokens.shared with tokens.source.level char)")
        if data.target_width is not None and data.target_width >= data.max_target_length:
            raise ValueError(f"data.max_target_length ({data.max_target_length}) must exceed data.target_width "
                             f"({data.target_width}): the decoder reads <sos> before it")

    def refuse_warmup(self, why: str) -> None:
        """The seed's warm-up schedule is the seq2seq Transformer's (defined by its d_model); ``why`` another."""
        if self.train.schedule == "transformer":
            raise ValueError(why)


# --- loading -----------------------------------------------------------------

AnyConfig = TypeVar("AnyConfig", bound=BaseModel)  # a Config, or another command's (seqlab.vectors.config)


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one ``key.path=value`` override (value parsed as YAML) to ``raw`` in place."""
    key, sep, value = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got {assignment!r}")
    key = key.strip()
    *parents, leaf = key.split(".")
    shown = key if all(part.isidentifier() for part in (*parents, leaf)) else repr(key)  # a line break stays escaped
    node = raw
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {shown}: {part!r} is not a section")
        node = child
    try:
        node[leaf] = yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {shown}: not a YAML value ({_yaml_problem(exc)})") from None
    except ValueError as exc:  # a YAML scalar Python cannot make: 2001-13-01, an integer of 5,000 digits
        raise ConfigError(f"--set {shown}: {_value_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"--set {shown}: its value is nested too deep") from None


def _all_keys(schema: type[BaseModel]) -> set[str]:
    """Every key of ``schema`` and of the sections inside it, at any depth."""
    keys: set[str] = set()
    seen: set[type[BaseModel]] = set()
    todo = [schema]
    while todo:
        section = todo.pop()
        if section not in seen:
            seen.add(section)
            keys |= set(section.model_fields)
            todo += [inner for field in section.model_fields.values() for inner in _sections_in(field.annotation)]
    return keys


def _sections_in(annotation: Any) -> list[type[BaseModel]]:
    """The sections an annotation names: itself (the model section: every kind's), or the members of its unions,
    lists and Annotated."""
    if annotation is ModelSection:
        return list(registry.model_sections().values())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [section for arg in get_args(annotation) for section in _sections_in(arg)]


def _describe(err: Mapping[str, Any], schema: type[BaseModel]) -> str:
    loc = ".".join(_key(p) for p in err["loc"])
    if not loc:
        return err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(err["loc"][-1]), _all_keys(schema), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{loc}: unknown key{hint}"
    return f"{loc}: {err['msg']}"


def _key(part: Any) -> str:
    """One part of a problem's dotted key: a name as it is, or quoted with its control characters escaped (a key
    read from the file may hold a line break, a dot or a space)."""
    return str(part) if isinstance(part, int) or (isinstance(part, str) and part.isidentifier()) else repr(part)


def _unwritable(raw: Any) -> list[str]:
    """The problems of the integers in ``raw`` that have too many digits to be written back to config.yaml (YAML's
    hexadecimal, octal, binary and base-60 forms are read without Python's limit on decimal digits)."""
    problems: list[str] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), raw)]
    while stack:  # not recursive: ``raw`` may be nested as deep as YAML could read
        where, node = stack.pop()
        if isinstance(node, dict | list):
            stack += [((*where, k), v) for k, v in (node.items() if isinstance(node, dict) else enumerate(node))]
        elif isinstance(node, int) and not isinstance(node, bool):
            try:
                str(node)
            except ValueError:
                name = ".".join(_key(p) for p in where) or "the value"
                problems.append(f"{name}: an integer of more than {sys.get_int_max_str_digits()} digits")
    return sorted(problems)


@overload
def parse_config(raw: dict[str, Any], origin: str = ...) -> Config: ...
@overload
def parse_config(raw: dict[str, Any], origin: str = ..., *, schema: type[AnyConfig]) -> AnyConfig: ...
@overload
def parse_config(raw: dict[str, Any], origin: str, schema: type[AnyConfig]) -> AnyConfig: ...
def parse_config(raw: dict[str, Any], origin: str = "<config>", schema: type[BaseModel] = Config) -> BaseModel:
    """``raw`` as a ``schema`` (a run's ``Config`` unless told); every problem named on its own line."""
    lines = _unwritable(raw)
    if not lines:
        try:
            return schema.model_validate(raw)
        except ValidationError as exc:
            lines = [_describe(e, schema) for e in exc.errors()]
    raise ConfigError(f"invalid config {origin}:\n  " + "\n  ".join(lines))


@overload
def load_config(path: str | Path, overrides: Sequence[str] = ...) -> Config: ...
@overload
def load_config(path: str | Path, overrides: Sequence[str] = ..., *, schema: type[AnyConfig]) -> AnyConfig: ...
@overload
def load_config(path: str | Path, overrides: Sequence[str], schema: type[AnyConfig]) -> AnyConfig: ...
def load_config(path: str | Path, overrides: Sequence[str] = (), schema: type[BaseModel] = Config) -> BaseModel:
    """Read a YAML config, apply ``--set`` overrides, validate as ``schema``."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(exc)})") from None
    except ValueError as exc:  # a YAML scalar Python cannot make: 2001-13-01, an integer of 5,000 digits
        raise ConfigError(f"{path}: not a usable YAML value ({_value_problem(exc)})") from None
    except RecursionError:  # PyYAML reads nested collections recursively
        raise ConfigError(f"{path}: nested too deep to be a config") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    for assignment in overrides:
        apply_override(raw, assignment)
    try:
        return parse_config(raw, str(path), schema)
    except RecursionError:
        raise ConfigError(f"{path}: nested too deep to be a config") from None


def _value_problem(exc: ValueError) -> str:
    """What Python could not make of a YAML scalar, on one line and in a user's words."""
    if "integer string conversion" in str(exc):
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return " ".join(str(exc).split())


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What PyYAML found wrong, and where, on one line (its message quotes the text over several)."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return " ".join(str(exc).split())


def dump_config(config: BaseModel) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def changed_keys(before: BaseModel, after: BaseModel, sections: Sequence[str]) -> list[str]:
    """The dotted keys of ``sections`` whose values differ between two configurations."""
    a, b = before.model_dump(mode="json"), after.model_dump(mode="json")
    return [key for section in sections for key in _diff(a[section], b[section], section)]


def _diff(a: Any, b: Any, prefix: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [k for key in sorted(a.keys() | b.keys()) for k in _diff(a.get(key), b.get(key), f"{prefix}.{key}")]
    return [] if a == b else [prefix]

"""A kind of model from outside seqlab, in one module (issue 35's acceptance): it predicts how many characters a
pair's target has from its source's characters (a linear model over character counts). Registered with
``register()``, it is trained by ``seqlab train``, saved and resumed by the trainer, loaded, scored by ``seqlab
eval``, served by ``seqlab serve`` and used by a command of its own, ``seqlab length``: all through
``seqlab.registry``, no line of seqlab knowing it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch
import typer
from pydantic import Field
from torch import nn

from seqlab.config import Config, ModelSection
from seqlab.corpora import PAIRS
from seqlab.data import load_splits, resolve_data_dir
from seqlab.registry import InferenceOptions, Kind
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime

FEATURES = 128  # a count per ASCII character; others count as the last one


class LengthConfig(ModelSection):
    """The length model's section: ``model.type: length``."""

    type: Literal["length"] = "length"
    scale: float = Field(0.1, gt=0, description="the features' scale")

    def check(self, config: Config) -> None:
        config.refuse_warmup("length models use train.schedule: constant or cosine")


class LengthModel(nn.Module):
    def __init__(self, cfg: LengthConfig) -> None:
        super().__init__()
        self.scale = cfg.scale
        self.linear = nn.Linear(FEATURES, 1)

    def forward(self, texts: list[str]) -> torch.Tensor:  # -> (len(texts),) predicted lengths
        counts = np.zeros((len(texts), FEATURES), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text:
                counts[row, min(ord(char), FEATURES - 1)] += 1
        return self.linear(torch.from_numpy(counts) * self.scale).squeeze(-1)


def squared_errors(model: LengthModel, pairs: list[Any]) -> torch.Tensor:
    predicted = model([source for source, _ in pairs])
    return (predicted - torch.tensor([float(len(target)) for _, target in pairs])) ** 2


class LengthFamily:
    """What ``seqlab.train.trainer.Trainer`` trains (``seqlab.train.family.base.Family``)."""

    unit = "texts"

    def __init__(self, config: Config, model: LengthModel, train: list[Any], valid: list[Any]) -> None:
        self.config, self._model, self.train, self.valid = config, model, train, valid

    @property
    def model(self) -> nn.Module:
        return self._model

    def use(self, runtime: Runtime) -> None:
        """It computes in fp32 whatever the runtime says (so ``auto``, where measured, finds both the same)."""

    def describe(self) -> str:
        return f"{len(self.train)} train / {len(self.valid)} valid pairs; a length model"

    def batches(self, epoch: int) -> list[list[np.ndarray]]:
        order = np.random.RandomState(self.config.seed * 1000 + epoch).permutation(len(self.train))
        return [np.array_split(order, max(1, len(order) // 8))]  # one stream

    def loss(self, indices: np.ndarray) -> tuple[torch.Tensor, int]:
        return squared_errors(self._model, [self.train[i] for i in indices]).sum(), len(indices)

    def validate(self) -> dict[str, Any]:
        with torch.no_grad():
            return {"loss": squared_errors(self._model, self.valid).mean().item()}

    @classmethod
    def build(cls, config: Config, run: RunDir, data_dir: str | Path | None, resume: bool, parts: int = 1,
              share: range | None = None, runtime: Runtime | None = None) -> LengthFamily:
        assert isinstance(config.model, LengthConfig)
        splits = load_splits(config.data, resolve_data_dir(data_dir))
        return cls(config, LengthModel(config.model), splits.require("train"), splits.require("valid"))

    @staticmethod
    def summary(valid: dict[str, Any]) -> str:
        return f"valid loss {valid['loss']:.3f}"

    def carried(self) -> dict[str, torch.Tensor]:
        return {}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        pass


class LengthPredictor:
    def __init__(self, run_dir: Path) -> None:
        run = RunDir(run_dir)
        self.config = run.config()
        assert isinstance(self.config.model, LengthConfig)
        self.model = LengthModel(self.config.model)
        run.load_model(self.model)
        self.model.eval()

    def predict(self, text: str) -> float:
        with torch.no_grad():
            return round(self.model([text]).item(), 3)


class Page:
    """What ``seqlab serve`` shows of a length model."""

    @staticmethod
    def info(run_dir: Path, predictor: LengthPredictor, limits: Any) -> dict[str, Any]:
        return {"kind": "length", "run": run_dir.name, "scale": predictor.config.model.model_dump()["scale"]}

    @staticmethod
    def add_routes(app: Any, worker: Any, predictor: LengthPredictor) -> None:
        app.get("/api/length")(lambda text: {"length": predictor.predict(text)})


def length(run_dir: Annotated[Path, typer.Argument()], text: Annotated[str, typer.Argument()]) -> None:
    """Predict the length of a text's target."""
    typer.echo(f"{LengthPredictor(run_dir).predict(text)}")


class Lengths(Kind):
    name = "length"
    noun = "a length model"
    use = "seqlab length"
    model_types = ("length",)
    formats = PAIRS

    def sections(self) -> dict[str, type[Any]]:
        return {"length": LengthConfig}

    def family(self) -> Any:
        return LengthFamily

    def load(self, run_dir: Path, how: InferenceOptions = InferenceOptions()) -> LengthPredictor:  # noqa: B008
        return LengthPredictor(run_dir)

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008
        predictor = self.load(run_dir)
        pairs = load_splits(predictor.config.data, resolve_data_dir(data_dir)).require(split)
        with torch.no_grad():
            return {"loss": squared_errors(predictor.model, pairs).mean().item(), "texts": len(pairs)}

    def page(self) -> Any:
        return Page

    def commands(self) -> list[tuple[str, Callable[..., Any]]]:
        return [("length", length)]

"""JoeyNMT's ``parse_global_args``: the settings of a config as named tuples."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import torch


class TestConfig(NamedTuple):
    load_model: str
    beam_size: int
    batch_size: int
    max_output_length: int


class BaseConfig(NamedTuple):
    model_dir: Path
    data: dict[str, Any]
    model: dict[str, Any]
    test: TestConfig
    device: torch.device
    n_gpu: int
    autocast: dict[str, Any]


def parse_global_args(cfg: dict[str, Any], rank: int = 0, mode: str = "train") -> BaseConfig:
    testing = cfg["testing"]
    test = TestConfig(testing["load_model"], testing["beam_size"], testing["batch_size"], testing["max_output_length"])
    return BaseConfig(Path(cfg["model_dir"]), cfg["data"], cfg["model"], test, torch.device("cpu"), 0,
                      {"enabled": False})

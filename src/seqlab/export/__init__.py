"""Trained runs for other engines: CTranslate2 (``ctranslate2``) and ONNX Runtime (``onnx``); ``load_translator``
opens a run directory, or an export, with the engine that decodes it. The engines are imported when first used,
so that ``seqlab.export.onnx_search`` runs without PyTorch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from seqlab.predictors.translator import Translator

Engine = Literal["torch", "ct2", "onnx"]  # seqlab's own model; a CTranslate2 export; an ONNX export
Target = Literal["ctranslate2", "onnx"]


def export(run_dir: str | Path, out: str | Path, to: Target, quantization: str = "float32") -> Path:
    """The run's best model for the engine ``to``, written to ``out`` with the run's config and tokenizers."""
    from seqlab.export.ctranslate2 import export_ctranslate2
    from seqlab.export.onnx import export_onnx

    return (export_onnx if to == "onnx" else export_ctranslate2)(run_dir, out, quantization)


def load_translator(path: str | Path, engine: Engine = "torch", int8: bool = False, workers: int = 1) -> Translator:
    """A translator for ``path``: a run directory (``torch``; ``int8``: its linear layers quantised for decoding)
    or the directory of ``seqlab export`` for that engine (quantised, if at all, when exported). ``workers``:
    batches decoded side by side, each on its share of the threads (``Runtime.map``; CTranslate2's
    ``inter_threads``)."""
    if int8 and engine != "torch":
        raise ValueError("int8 quantises seqlab's own model; an export is quantised when it is made "
                         "(seqlab export --quantization int8)")
    if engine == "ct2":
        from seqlab.export.ctranslate2 import load_ct2

        return load_ct2(path, workers=workers)
    if engine == "onnx":
        from seqlab.export.onnx import load_onnx

        return load_onnx(path, workers=workers)
    from seqlab.predictors.translator import load

    return load(path, int8=int8, workers=workers)


__all__ = ["Engine", "Target", "export", "load_translator"]

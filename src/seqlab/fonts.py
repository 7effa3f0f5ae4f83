"""The Korean font seqlab draws and serves with: NanumGothic, from the ``koreanize-matplotlib`` package.

Found without importing that package (whose import restyles every matplotlib plot of the process),
so that the server can serve the font without loading matplotlib at all.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

FONT_FILE = "NanumGothic.ttf"


@cache
def font_path() -> Path:
    """NanumGothic.ttf, from the ``koreanize-matplotlib`` package (a dependency of seqlab)."""
    spec = importlib.util.find_spec("koreanize_matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("seqlab's plots need the Korean font of koreanize-matplotlib: pip install koreanize-matplotlib")
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / FONT_FILE
    if not path.is_file():
        raise RuntimeError(f"{path}: font file missing from koreanize-matplotlib")
    return path

"""The book's ``load_data`` and ``get_vocab``: ``question_answer`` lines of a file in this folder, one vocabulary of
characters, a shuffle by ``numpy.random.seed(seed)``, the last 10 % for test."""

from __future__ import annotations

from pathlib import Path

import numpy as np

id_to_char: dict[int, str] = {}
char_to_id: dict[str, int] = {}

Split = tuple[np.ndarray, np.ndarray]


def load_data(file_name: str = "addition.txt", seed: int = 1984) -> tuple[Split, Split]:
    lines = (Path(__file__).parent / file_name).read_text(encoding="utf-8").splitlines()
    pairs = [(line[:line.find("_")], line[line.find("_"):]) for line in lines]
    for text in (text for pair in pairs for text in pair):
        for char in text:
            id_to_char[char_to_id.setdefault(char, len(char_to_id))] = char
    x = np.array([[char_to_id[c] for c in q] for q, _ in pairs])
    t = np.array([[char_to_id[c] for c in a] for _, a in pairs])
    indices = np.arange(len(x))
    np.random.seed(seed)
    np.random.shuffle(indices)
    x, t = x[indices], t[indices]
    split_at = len(x) - len(x) // 10
    return (x[:split_at], t[:split_at]), (x[split_at:], t[split_at:])


def get_vocab() -> tuple[dict[str, int], dict[int, str]]:
    return char_to_id, id_to_char

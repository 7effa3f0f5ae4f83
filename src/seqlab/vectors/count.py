"""Count-based word vectors (seed 002 §2.3–2.4): co-occurrence counts, PPMI, SVD.

* Co-occurrence: ``C[w, c]`` counts how often ``c`` is within ``window_size`` words of ``w``.
* ``PMI(x, y) = log2 (C(x, y) · N) / (C(x) · C(y))``, ``PPMI = max(0, PMI)``, where N is the sum of all
  counts and C(x) a row sum, as the seed's ``ppmi`` computes them.
* SVD ``X = U S Vᵀ``: the leading columns of U are the dense word vectors.

The dense functions are the seed's, for its small examples (``np.linalg.svd`` is O(V³)). Real
corpora use the sparse ones: ``co_matrix_sparse`` and ``ppmi_sparse`` (scipy CSR, only the pairs that
occur) and ``svd_vectors(..., randomized=True)`` (scikit-learn's randomized SVD), never a dense V × V
matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import randomized_svd

from seqlab.vectors.pairs import neighbours, stream


def create_co_matrix(corpus: np.ndarray, vocab_size: int, window_size: int = 1) -> np.ndarray:
    """The seed's ``create_co_matrix``: (V, V) int32 counts over one stream of ids."""
    matrix = np.zeros((vocab_size, vocab_size), dtype=np.int32)
    for offset in range(1, window_size + 1):
        left, right = corpus[:-offset], corpus[offset:]
        np.add.at(matrix, (left, right), 1)  # right neighbours
        np.add.at(matrix, (right, left), 1)  # left neighbours
    return matrix


def co_matrix_sparse(sentences: Sequence[np.ndarray], vocab_size: int, window_size: int = 1) -> sp.csr_matrix:
    """Co-occurrence counts as a sparse (V, V) matrix; windows do not cross from one sentence into the next
    (one sentence holding the whole stream gives ``create_co_matrix``)."""
    ids, sentence = stream(sentences)
    pairs = [neighbours(sentence, o) for d in range(1, window_size + 1) for o in (-d, d)]
    row = np.concatenate([ids[position] for position, _ in pairs])
    col = np.concatenate([ids[other] for _, other in pairs])
    data = np.ones(len(row), dtype=np.float64)
    return sp.csr_matrix((data, (row, col)), shape=(vocab_size, vocab_size))  # duplicates are summed


def pmi(count_xy: float, total: float, count_x: float, count_y: float) -> float:
    """``log2 (C(x, y) · N) / (C(x) · C(y))``: the seed's examples give 2.3219 (the, car) and 7.9658 (car, drive)."""
    return float(np.log2(count_xy * total / (count_x * count_y)))


def ppmi(matrix: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """The seed's ``ppmi`` over a dense co-occurrence matrix: ``max(0, log2(C·N / (S_i S_j) + eps))``, float32;
    0 for words that never co-occur."""
    counts = matrix.astype(np.float64)
    total, sums = counts.sum(), counts.sum(axis=0)
    expected = np.outer(sums, sums)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(expected > 0, counts * total / np.where(expected > 0, expected, 1.0), 0.0)
    return np.maximum(0.0, np.log2(ratio + eps)).astype(np.float32)


def ppmi_sparse(matrix: sp.spmatrix) -> sp.csr_matrix:
    """PPMI of the pairs that occur (the rest stay 0), without the dense ``eps``: float32 CSR."""
    coo = sp.coo_matrix(matrix, dtype=np.float64)
    total = coo.sum()
    sums = np.asarray(coo.sum(axis=0)).ravel()
    values = np.log2(coo.data * total / (sums[coo.row] * sums[coo.col]))
    keep = values > 0
    return sp.csr_matrix((values[keep].astype(np.float32), (coo.row[keep], coo.col[keep])), shape=coo.shape)


def svd_vectors(matrix: np.ndarray | sp.spmatrix, dim: int, randomized: bool = False, seed: int = 0) -> np.ndarray:
    """Dense word vectors: the first ``dim`` columns of U in ``X = U S Vᵀ`` (the seed keeps U).
    ``randomized``: scikit-learn's randomized SVD, for large (sparse) matrices; otherwise the full SVD."""
    if randomized:
        u, _, _ = randomized_svd(matrix, n_components=dim, random_state=seed)
        return u.astype(np.float32)
    if sp.issparse(matrix):
        raise ValueError("a sparse matrix takes randomized=True: the full SVD needs it dense (O(V³))")
    u, _, _ = np.linalg.svd(np.asarray(matrix, dtype=np.float64))
    return u[:, :dim].astype(np.float32)

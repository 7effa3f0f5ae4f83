"""A stand-in of gensim 4.4 with the part of its interface that ``benchmarks/gensim_word2vec.py`` uses, for the smoke
tests (tests/test_bench_races.py), where gensim, which lives in a venv of its own, is absent: put this folder's
parent on ``PYTHONPATH``. Nothing is learnt: the vectors are random, the scores of its evaluation are 0."""

__version__ = "4.4.0.stand-in"

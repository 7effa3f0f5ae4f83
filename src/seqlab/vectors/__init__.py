"""Word vectors, as seed 002 ch. 2–4 build them (docs/seeds.md): by counting (co-occurrence → PPMI → SVD)
and by prediction (word2vec).

* ``corpus.py``: text to word ids in first-occurrence order, contexts and targets, one-hot, bag of words;
* ``count.py``: co-occurrence counts, PMI/PPMI, SVD to dense vectors; dense for the seed's small examples,
  sparse (scipy) for real corpora, never a dense V × V matrix there;
* ``similarity.py``: cosine similarity, ``most_similar``, ``analogy``;
* ``pairs.py``: word2vec's examples: vocabulary with ``min_count``, subsampling, dynamic windows;
* ``word2vec.py``: the seed's simple CBOW and skip-gram, and both with negative sampling, in PyTorch;
* ``evaluate.py``: analogy accuracy and similarity correlation, with coverage, as gensim computes them;
* ``train.py``: ``train_word2vec`` with ``config.VectorsTrainConfig``'s options, resumable by epoch;
* ``run.py``: ``train_vectors``, a config's corpora to a run directory (``seqlab vectors train``);
* ``wordvectors.py``: ``WordVectors``, a run's vectors to use: similar words, analogies, scores, export.
"""

from seqlab.vectors.wordvectors import WordVectors, load

__all__ = ["WordVectors", "load"]

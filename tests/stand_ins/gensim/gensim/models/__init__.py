"""``gensim.models.Word2Vec``."""

from gensim.models.word2vec import Word2Vec

__all__ = ["Word2Vec"]

"""Trained models in use, one class per kind of model over a common ``Predictor`` (``base``): ``Translator``
(seq2seq), ``LanguageModel``, ``Classifier``, ``MaskedLanguageModel`` (a pretrained BERT) and ``Answerer`` (span
extraction). Each module's ``load(RUN_DIR)`` rebuilds its model from a run directory."""

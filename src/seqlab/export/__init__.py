"""Trained runs for other engines: CTranslate2 (``ctranslate2``)."""

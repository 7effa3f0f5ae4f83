"""A stand-in for JoeyNMT 2.3.0, for the smoke tests of the benchmarks that run it in the peers' venv
(tests/test_bench_book.py): the commands and functions they use, with JoeyNMT's names and the files it writes.

* ``python -m joeynmt train CONFIG --skip-test`` and ``python -m joeynmt test CONFIG --output-path OUT``
  (``__main__.py``: benchmarks/joeynmt_date.py, date_race.py);
* ``config.parse_global_args``, ``prediction.build_model / prepare / predict`` and
  ``transformer_layers.PositionalEncoding`` (benchmarks/peers/joeynmt_decode.py).

Nothing is learnt: a recipe's valid accuracy grows with its learning rate and epoch, test answers are the
references with every 4th left empty, and ``predict`` echoes each source. The real benchmarks run JoeyNMT.
"""

__version__ = "2.3.0"

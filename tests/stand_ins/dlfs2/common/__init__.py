"""The book's ``common`` package, as far as the benchmarks import it (see ../README.md)."""

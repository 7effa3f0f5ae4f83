"""The book's ``dataset`` package: ``sequence`` (see ../README.md)."""

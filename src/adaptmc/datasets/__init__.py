"""Data set loaders. Each takes a path and says clearly when it is absent."""

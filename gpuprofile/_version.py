__version__ = "0.1.0"  # also in pyproject.toml

"""The package version, one place (pyproject.toml carries the same; a test compares them)."""

from typing import Final

__version__: Final = "0.1.0"

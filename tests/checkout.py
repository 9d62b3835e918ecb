"""Where this checkout of the project is: one root for every test, at any depth under tests/, and for bench/."""

from __future__ import annotations

from pathlib import Path

#: the repository's root (this file is tests/checkout.py)
ROOT = Path(__file__).resolve().parents[1]

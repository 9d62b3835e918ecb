"""Root conftest. The harness plugin itself loads through the `pytest11` entry point
(`pip install -e '.[dev]'`), for checks/ and tests/ alike."""

"""The product reads the wall clock through core/clock.py only (`utcnow`, `now_ts`): every stamp, deadline and
"today" agrees with every other, a test can move them together (`tests/as_of.py`, `lifecycle_fakes.pin_clock`), and
no figure depends on which module asked. The simulator's provider clock (`time.time`, a real provider's own clock)
and file-time comparisons (`core/statefile.py` against a file's mtime) are not the product's clock."""

from __future__ import annotations

import ast
from pathlib import Path

from checkout import ROOT

SRC = ROOT / "src" / "gpuharness"
OWNER = SRC / "core" / "clock.py"
#: what reads the wall clock: datetime.now(), datetime.utcnow(), date.today(), datetime.today(), time.time(), however
#: the module is reached (`datetime.now`, `datetime.datetime.now`, `dt.datetime.now`)
READS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"), ("time", "time")}
#: time.time() against a file's mtime (the file system's clock, not the product's)
FILE_TIMES = {"core/statefile.py"}


def clock_reads(path: Path, root: Path = SRC) -> list[str]:
    """`datetime.now(...)` and its kin in a module, as `file:line`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
        if (name, node.func.attr) in READS:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_only_core_clock_reads_the_wall_clock():
    found = [read for path in sorted(SRC.rglob("*.py")) if path != OWNER and "sim" not in path.relative_to(SRC).parts
             and path.relative_to(SRC).as_posix() not in FILE_TIMES for read in clock_reads(path)]
    assert found == [], f"read the time through gpuharness.core.clock.utcnow instead: {found}"


def test_the_scan_finds_a_clock_read_however_it_is_reached(tmp_path):
    module = tmp_path / "stamp.py"
    module.write_text("import datetime as dt\nimport time\nfrom datetime import UTC, datetime\n\n\ndef stamp():\n"
                      "    return datetime.now(UTC), dt.datetime.now(dt.UTC), dt.date.today(), time.time()\n")
    assert clock_reads(module, tmp_path) == ["stamp.py:7"] * 4

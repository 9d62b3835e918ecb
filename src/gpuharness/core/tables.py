"""The tables that the packages above the core fill in: each entry is declared beside what it describes (a runtime
beside its client, a provider adapter on its class), as Testinfra keeps its backends beside their classes.

The core imports nothing above it, so it cannot import those declarations itself. The top package names the built-in
ones once (`gpuharness.BUILTIN`, as pytest's config names its default plugins) and hands the tables the loader that
imports them; a table runs it the first time it is read. So importing the core stays cheap, and no reader ever sees a
table half filled. (Entry points were the other way: every new runtime would need the package installed again, and
every start a scan of all installed distributions; the tuple needs neither.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Final, TypeVar, final

T = TypeVar("T")

#: the table of runtimes (core.runtimes) and of provider adapters, by kind (providers.base), as schemas name them
RUNTIMES: Final = "runtimes"
PROVIDER_KINDS: Final = "provider kinds"
#: every table by what it holds: the schemas and the default policy read their names
TABLES: Final[dict[str, Table[object]]] = {}
_loader: list[Callable[[], object]] = []
_state: list[str] = ["unnamed"]  # unnamed -> named -> loading -> loaded
_generation: list[int] = [0]


def load_builtins_with(loader: Callable[[], object]) -> None:
    """Name what fills the tables (the top package calls this once, with what imports its BUILTIN modules)."""
    _loader[:] = [loader]
    if _state[0] == "unnamed":
        _state[0] = "named"


def complete() -> None:
    """Import the built-in declarations once. A read while they load is a declaration read at import time, which
    would see a table half filled: it is refused, naming the table."""
    if _state[0] == "loaded":
        return
    if _state[0] != "named":
        when = "while the built-in entries load" if _state[0] == "loading" else "before they were named"
        raise RuntimeError(f"a table was read {when}: read it when called, not when a module is imported")
    _state[0] = "loading"
    try:
        _loader[0]()
    except BaseException:
        _state[0] = "named"
        raise
    _state[0] = "loaded"


def generation() -> int:
    """A number that changes whenever any table does, its built-in entries in (what is derived from the tables is
    cached by it)."""
    complete()
    return _generation[0]


@final
class Table(MutableMapping[str, T]):
    """name -> entry, in declaration order. Read, it holds every built-in entry; `register` adds one, once."""

    __slots__ = ("_entries", "what")

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        TABLES[what] = self  # type: ignore[assignment]

    def register(self, name: str, entry: T) -> T:
        """Declare the entry called name; a second, different entry of that name is refused."""
        known = self._entries.get(name)
        if known is not None and known != entry:
            raise ValueError(f"{self.what}: {name!r} is declared twice ({known!r} and {entry!r})")
        self._entries[name] = entry
        _generation[0] += 1
        return entry

    def __getitem__(self, name: str) -> T:
        complete()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        complete()
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        complete()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        complete()
        return name in self._entries

    def __setitem__(self, name: str, entry: T) -> None:
        """Replace or add an entry outright (a test's stand-in): after the built-in ones, so none overwrites it."""
        complete()
        self._entries[name] = entry
        _generation[0] += 1

    def __delitem__(self, name: str) -> None:
        complete()
        del self._entries[name]
        _generation[0] += 1

    def __repr__(self) -> str:
        return f"Table({self.what!r}: {', '.join(self._entries)})"


def names(what: str) -> tuple[str, ...]:
    """The names in the table that holds `what` (KeyError: no such table once the built-in entries are in)."""
    complete()
    return tuple(TABLES[what])

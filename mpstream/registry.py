"""A registry of plugins kept in one folder (a package): the transports (mpstream/transports/,
beside those mpstream/transport.py defines), the workloads (runner/workloads/) and the networks
(runner/sites/). Each module of the folder registers what it defines when it is imported; the
registry imports them all on its first lookup, never when it is itself imported, because they
import the modules that ask the registry which names there are."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The plugins of package `package` (its folder `path`, kept as given so that a folder
    added to the package's path is seen), each under the name `name_of` gives it, which must
    match `name_pattern` when one is given; `what` names one in errors ("workload kind")."""

    def __init__(self, package: str, path: Iterable[str], what: str,
                 name_of: Callable[[T], str], name_pattern: str | None = None):
        self.package, self.path, self.what, self.name_of = package, path, what, name_of
        self.name_pattern = name_pattern
        self.items: dict[str, T] = {}
        self.loaded = False

    def register(self, item: T) -> T:
        name = self.name_of(item)
        if self.name_pattern and not re.fullmatch(self.name_pattern, name):
            raise ValueError(f"{self.what} name {name!r} does not match {self.name_pattern}")
        if name in self.items:
            raise ValueError(f"a {self.what} {name!r} is registered already")
        self.items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Forget `name` (a test's plugin, registered from a folder of its own)."""
        self.items.pop(name, None)

    def load(self, again: bool = False) -> None:
        """Import the folder's modules (`again`: also those added to it since, as a test does;
        a module imported already is not run twice)."""
        if not self.loaded or again:
            self.loaded = True
            for module in pkgutil.iter_modules(list(self.path)):
                if module.name != "base":  # the interface, not a plugin
                    importlib.import_module(f"{self.package}.{module.name}")

    def names(self) -> list[str]:
        self.load()
        return list(self.items)

    def values(self) -> list[T]:
        self.load()
        return list(self.items.values())

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self.items

    def get(self, name: str) -> T:
        """The plugin registered as `name`; a clear error naming those there are."""
        self.load()
        try:
            return self.items[name]
        except KeyError:
            raise ValueError(f"no {self.what} {name!r}; choose one of "
                             f"{', '.join(self.items)}") from None

    def check(self, name: str) -> str:
        """`name` when it is registered (a pydantic validator: Annotated[str,
        AfterValidator(registry.check)])."""
        self.get(name)
        return name

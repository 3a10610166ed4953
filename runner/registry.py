"""A registry of plugins kept in one folder (a package): the workloads (runner/workloads/) and
the networks (runner/sites/). Each module of the folder registers what it defines when it is
imported; the registry imports them all on its first lookup, never when it is itself imported,
because they import the scenario, which asks the registry which names there are."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The plugins of package `package` (its folder `path`), each under the name `name_of`
    gives it; `what` names one in errors ("workload kind")."""

    def __init__(self, package: str, path: Iterable[str], what: str,
                 name_of: Callable[[T], str]):
        self.package, self.path, self.what, self.name_of = package, list(path), what, name_of
        self.items: dict[str, T] = {}
        self.loaded = False

    def register(self, item: T) -> T:
        name = self.name_of(item)
        if name in self.items:
            raise ValueError(f"a {self.what} {name!r} is registered already")
        self.items[name] = item
        return item

    def _load(self) -> None:
        if not self.loaded:
            self.loaded = True
            for module in pkgutil.iter_modules(self.path):
                if module.name != "base":  # the interface, not a plugin
                    importlib.import_module(f"{self.package}.{module.name}")

    def names(self) -> list[str]:
        self._load()
        return list(self.items)

    def get(self, name: str) -> T:
        """The plugin registered as `name`; a clear error naming those there are."""
        self._load()
        try:
            return self.items[name]
        except KeyError:
            raise ValueError(f"no {self.what} {name!r}; choose one of "
                             f"{', '.join(map(repr, self.items))}") from None

    def check(self, name: str) -> str:
        """`name` when it is registered (a pydantic validator: Annotated[str,
        AfterValidator(registry.check)])."""
        self.get(name)
        return name

"""A registry of plugins, one style for every kind of them. Most are kept in one folder (a
package): the transports (mpstream/transports/), the workloads (runner/workloads/) and the
networks (runner/sites/). Each module (or package) of the folder registers what it defines when
it is imported; the registry imports them all on its first lookup, never when it is itself
imported, because they import the modules that ask the registry which names there are. The
folder's other modules (`not_plugins`: its interface, `base`, and helpers its plugins share) are
not imported as plugins. The others are defined in one module, which registers them as it runs
(`Registry.of_module`: the path policies, mphttp's schedulers, the host changes, the queue
disciplines, the per-trial figures); there is no folder to scan."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The plugins of package `package` (its folder `path`, kept as given so that a folder
    added to the package's path is seen; None: those of one module, `of_module`), each under
    the name `name_of` gives it, which must match `name_pattern` when one is given; `what` names
    one in errors ("workload kind"). Plugins are listed in the folder's order (its modules by
    name), whichever was imported first; one module's in the order they registered."""

    def __init__(self, package: str | None, path: Iterable[str], what: str,
                 name_of: Callable[[T], str], name_pattern: str | None = None,
                 not_plugins: Iterable[str] = ("base",)):
        self.package, self.path, self.what, self.name_of = package, path, what, name_of
        self.name_pattern = name_pattern
        self.not_plugins = frozenset(not_plugins)
        self.items: dict[str, T] = {}
        self.loaded = package is None  # one module's: nothing to import

    @classmethod
    def of_module(cls, what: str, name_of: Callable[[T], str],
                  name_pattern: str | None = None) -> Registry[T]:
        """The plugins of one module, registered as it runs and listed in that order."""
        return cls(None, (), what, name_of, name_pattern)

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
        if self.package is not None and (not self.loaded or again):
            self.loaded = True
            modules = [f"{self.package}.{m.name}" for m in pkgutil.iter_modules(list(self.path))
                       if m.name not in self.not_plugins]
            for module in modules:
                importlib.import_module(module)
            self._in_order(modules)

    def _in_order(self, modules: list[str]) -> None:
        """The plugins in the order of the folder's modules that define their classes (a plugin
        imported before the folder was loaded, as a helper of its package imports it, keeps its
        place); those from elsewhere after them, as they came."""
        def rank(item: T) -> int:
            home = getattr(item, "__module__", "")
            return next((i for i, m in enumerate(modules)
                         if home == m or home.startswith(m + ".")), len(modules))

        self.items = dict(sorted(self.items.items(), key=lambda kv: rank(kv[1])))

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

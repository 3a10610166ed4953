"""A topology as steps: each part of it (its namespaces, links, addresses, settings, MPTCP
endpoints, caps, emulators, path manager) is a small object that makes itself (`up`) and takes
itself away again (`undo`); `Steps` brings them up in order and undoes them in reverse.

A step's fields are its undo record: fixed before `up` runs, they are all `undo` needs, so a
step is undone as well in a process that never ran its `up` (a topology `netem up` left running,
taken down later by `netem down`). Undoing what is not there is fine: a step that failed, or
was interrupted, half-way is undone the same way as one that is up.

What a step makes inside the topology's own namespaces (`within`) goes with them: removing a
namespace removes its interfaces, addresses, routes, rules, settings and endpoints and stops its
processes. Such a step is not undone on its own when a step below it removes those namespaces
anyway (`removes`): a teardown costs no more than removing the namespaces did.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence


class Step(ABC):
    """One part of a topology. `up` makes it, `undo` takes away whatever of it is there."""

    @abstractmethod
    def up(self) -> None: ...

    @abstractmethod
    def undo(self) -> None: ...

    @property
    def within(self) -> frozenset[str]:
        """The namespaces that hold everything this step makes (empty: it makes something
        outside them)."""
        return frozenset()

    @property
    def removes(self) -> frozenset[str]:
        """The namespaces this step's undo removes, with everything in them."""
        return frozenset()


class Steps:
    """Steps brought up in order and undone in reverse. When one fails (or Ctrl-C lands in
    it), it undoes what it did itself and the steps before it are undone, last first, before
    the failure goes on up."""

    def __init__(self, steps: Sequence[Step], *, already_up: bool = False):
        self.steps = list(steps)
        # The steps that may have made something, in the order they were brought up;
        # `already_up`: all of them, for a topology another process built.
        self._up: list[Step] = list(steps) if already_up else []

    def up(self) -> None:
        try:
            for step in self.steps:
                # Counted before it starts: an interrupt that lands just as its `up` returns
                # must still find it.
                self._up.append(step)
                step.up()
        except BaseException:
            # The failed step undoes what it did itself, even where its namespaces are about
            # to go: a step cleans up after itself, whatever it is composed with.
            self._undo(own=self._up[-1])
            raise

    def down(self) -> None:
        """Undoes the steps that are up, last first. A step's undo that fails does not keep
        the others from theirs: the first failure is raised once every step was tried, and
        the steps that failed count as up still (something of them may be left), so that
        the next teardown tries them again."""
        self._undo()

    def _undo(self, own: Step | None = None) -> None:
        failed: list[Step] = []
        failure: BaseException | None = None
        while self._up:
            step = self._up.pop()
            if step is not own and step.within and step.within <= self._removed_later():
                continue
            try:
                step.undo()
            except BaseException as exc:
                failure = failure or exc
                failed.insert(0, step)
        self._up = failed
        if failure is not None:
            raise failure

    def _removed_later(self) -> frozenset[str]:
        """The namespaces that the steps still up remove when they are undone."""
        return frozenset().union(*(step.removes for step in self._up))

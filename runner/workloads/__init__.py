"""The workloads: what a trial does on its network, one module each in this folder. A
`Workload` (runner/workloads/base.py) says what it needs, prepares it (media), runs one trial
and computes its own figures from a trial's data.

This module is the registry (mpstream/registry.py): a scenario's and a trial record's `kind` is a
name registered here. A new workload is one module in this folder: a `Workload` subclass and
`register(TheWorkload())`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import AfterValidator

from mpstream.registry import Registry

if TYPE_CHECKING:
    from mpstream.runner.workloads.base import Workload

WORKLOADS: Registry[Workload] = Registry(__name__, __path__, "workload kind", lambda w: w.kind)
register = WORKLOADS.register
workload_kinds = WORKLOADS.names
workload_for = WORKLOADS.get
# A registered workload kind, checked when a scenario or a trial record is read.
WorkloadKind = Annotated[str, AfterValidator(WORKLOADS.check)]

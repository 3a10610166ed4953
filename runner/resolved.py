"""What a scenario's condition resolved to, once, as the scenario loaded: a `ResolvedCondition`.

It holds every choice a condition leaves to files and defaults, made: the network (the profile
with the condition's overrides, built for its transport), the deployment over it, the transport
with its scheduler, the path policy, the paths that policy holds back and the metered paths with
their prices, and what the player is told. The preflight, the site, the topology, `play` and
`tune` all receive it; the run writes it into run.json (`resolved`, a condition's label to its
JSON), from which a trial's process reads it back as the same types, so that no one below the
scenario's loading reads a profile or a deployment file again or chooses a default again.

The sites make it (`Site.resolve`, runner/sites/), the scenario keeps one a condition
(`Scenario.resolved`, runner/scenario.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    field_serializer,
    model_validator,
)

from mpstream.deployment import Deployment
from mpstream.errors import UserError
from mpstream.netem.profile import Profile
from mpstream.transports.base import Transport, get_transport
from mpstream.transports.pathpolicy import DeadlineMarks, PathPolicy, policy_named


def _transport(value: Any) -> Transport:
    if isinstance(value, Transport):
        return value
    return get_transport(value["name"]).scheduled(value.get("scheduler"))


def _policy(value: Any) -> PathPolicy:
    return value if isinstance(value, PathPolicy) else policy_named(value)


# In JSON: the transport's name and the scheduler chosen (None: its default); the policy's name.
ChosenTransport = Annotated[Transport, PlainValidator(_transport),
                            PlainSerializer(lambda t: {"name": t.name, "scheduler": t.scheduler})]
ChosenPolicy = Annotated[PathPolicy, PlainValidator(_policy), PlainSerializer(lambda p: p.name)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PathRoles(_Frozen):
    """The network's paths by what the path policy does with them: the ones it holds back, and
    the metered ones with their price per GB (None: a network that does not say, a real one)."""

    held: tuple[int, ...] = ()
    metered: dict[int, float | None] | None = None


class PlayerSettings(_Frozen):
    """What the condition tells a player: the deadline policy's buffer marks, and the collector
    the page posts its events to (None: the one beside the page)."""

    deadline_marks: DeadlineMarks = Field(default_factory=DeadlineMarks)
    collector_url: str | None = None


class ResolvedCondition(_Frozen):
    """One condition, resolved: see the module's docstring. `network` is None where the network
    is no emulated one, `deployment` None where mpstream sets nothing of the ends (a real host).
    In JSON the network is written without its deployment, which is a field of its own."""

    label: str
    kind: str
    network: Profile | None = None
    deployment: Deployment | None = None
    transport: ChosenTransport
    path_policy: ChosenPolicy
    paths: PathRoles = PathRoles()
    player: PlayerSettings = PlayerSettings()

    @model_validator(mode="before")
    @classmethod
    def _network_runs_its_deployment(cls, data: Any) -> Any:
        """Read back from JSON, the network gets its deployment again (one object for both)."""
        if not isinstance(data, dict) or not isinstance(data.get("network"), dict) or \
                data.get("deployment") is None:
            return data
        deployment = Deployment.model_validate(data["deployment"])
        return {**data, "deployment": deployment,
                "network": {**data["network"], "deployment": deployment}}

    @field_serializer("network")
    def _network_alone(self, network: Profile | None) -> dict[str, Any] | None:
        # What the profile and the condition set, as read back; the deployment beside it.
        if network is None:
            return None
        return network.model_dump(mode="json", exclude_unset=True, exclude={"deployment"})

    @field_serializer("deployment")
    def _deployment_and_its_file(self, deployment: Deployment | None) -> dict[str, Any] | None:
        # Every setting, and the file it was read from (which a deployment's own JSON leaves out).
        if deployment is None:
            return None
        source = str(deployment.source) if deployment.source is not None else None
        return {**deployment.model_dump(mode="json"), "source": source}

    @classmethod
    def read(cls, data: Any, origin: str) -> ResolvedCondition:
        """One read back from its JSON; what does not hold on this machine (a trace its network
        names that is not here) is a UserError naming it after `origin`."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            said = "; ".join(f"{'.'.join(map(str, e['loc']))}: "
                             f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
            raise UserError(f"{origin}: {said}") from None

    def topology_profile(self) -> Profile | None:
        """The emulated network as its topology is built for a session: the network with the
        paths the policy starts held flagged backup (None: no emulated network)."""
        if self.network is None:
            return None
        return self.path_policy.starting(self.network, self.paths.held)

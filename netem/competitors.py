"""What a profile's competing users speak. A profile names each one's transport and knows no
more of it (the network's model imports no transport): the name is looked up here, where a
user's host is set up for it (the topology) and where a condition is read (the runner's
scenario), an unknown one refused as the profile's own error would be."""

from __future__ import annotations

from mpstream.errors import UserError
from mpstream.netem.profile import CompetitorSpec, Profile
from mpstream.transports.base import Transport, get_transport


def with_transports(profile: Profile) -> list[tuple[CompetitorSpec, Transport]]:
    """Each competing user with the transport it speaks, in the profile's order."""
    found = []
    for k, user in enumerate(profile.competitors):
        try:
            found.append((user, get_transport(user.transport)))
        except UserError as exc:
            raise UserError(f"profile {profile.source or profile.name} is invalid: "
                            f"competitors.{k}.transport: {exc}") from None
    return found

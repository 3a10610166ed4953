"""How the origin hands a response to the kernel: the nginx socket options a deployment can set.

One model for the profile's `[server]` table, `mpstream serve`'s options and the nginx
configuration, so each option is named and checked in one place.

`tcp_nopush` is off by default, against nginx's usual advice, because of what it does under
MPTCP (docs/penalties/startup.md): nginx's tcp_nopush is TCP_CORK, and a corked MPTCP subflow
holds a sub-MSS piece of the connection's data for up to the kernel's 200 ms cork timer while
the scheduler sends the data after it on the other subflows. The receiver cannot deliver past
the held bytes, so the whole connection stalls for the timer; single-path TCP only delays the
held bytes themselves.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

_SIZE = re.compile(r"^(\d+)([kKmM]?)$")


class SendOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tcp_nopush: bool = False  # nginx tcp_nopush: TCP_CORK around sendfile responses
    tcp_nodelay: bool = True  # nginx tcp_nodelay: TCP_NODELAY on keep-alive connections
    sndbuf: str | None = None  # listen ... sndbuf=SIZE (SO_SNDBUF), e.g. "4m"; None: autotuned

    @field_validator("sndbuf")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is None:
            return None
        match = _SIZE.match(value.strip())
        if not match or int(match.group(1)) == 0:
            raise ValueError(
                f"sndbuf {value!r} is not a size nginx reads: give bytes, or a number with "
                "k or m (e.g. 512k, 4m)")
        return match.group(1) + match.group(2).lower()

"""What an older profile file may still say of its endpoints, and where each now lives: the
endpoints' settings are a deployment's (mpstream/deployment.py). The profile reads them into its
deployment, on top of it as a `set` would be, and the loader warns, naming the new home."""

from __future__ import annotations

from typing import Any

from mpstream.errors import warn

FIELDS = {
    "cc": "a deployment's server.cc and client.cc",
    "sysctls": "a deployment's server.sysctls and client.sysctls",
    "server": "a deployment's server.nginx",
    "mptcp": "a deployment's server.mptcp (scheduler, checksum) and client.mptcp (the rest)",
    "backup": "a deployment's client.backup (a list of paths)",
}
# The `mptcp` keys that are the server's (the sender's scheduler); `checksum` is both ends'.
SERVER_MPTCP = ("scheduler", "checksum")


def has_endpoint_fields(data: dict[str, Any]) -> bool:
    return any(k in data for k in ("cc", "sysctls", "server", "mptcp")) or any(
        isinstance(p, dict) and "backup" in p for p in data.get("paths") or [])


def into_deployment(data: dict[str, Any], dep: dict[str, Any]) -> dict[str, Any]:
    """Raw profile data with its endpoint fields moved into `dep`, its deployment's raw data."""
    data = dict(data)
    server, client = dict(dep.get("server") or {}), dict(dep.get("client") or {})
    if "cc" in data:
        server["cc"] = client["cc"] = data.pop("cc")
    if "sysctls" in data:
        sysctls = data.pop("sysctls") or {}
        server["sysctls"] = {**(server.get("sysctls") or {}), **sysctls}
        client["sysctls"] = {**(client.get("sysctls") or {}), **sysctls}
    if "server" in data:
        server["nginx"] = {**(server.get("nginx") or {}), **(data.pop("server") or {})}
    if "mptcp" in data:
        server["mptcp"], client["mptcp"] = _split_mptcp(dict(data.pop("mptcp") or {}),
                                                        server, client)
    backup = _backup_paths(data, list(client.get("backup") or []))
    if backup:
        client["backup"] = backup
    data["deployment"] = {**dep, "server": server, "client": client}
    return data


def _split_mptcp(mptcp: dict[str, Any], server: dict[str, Any], client: dict[str, Any]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    smp, cmp = dict(server.get("mptcp") or {}), dict(client.get("mptcp") or {})
    for key, value in mptcp.items():
        if key in SERVER_MPTCP:
            smp[key] = value
        if key not in SERVER_MPTCP or key == "checksum":
            cmp[key] = value
    return smp, cmp


def _backup_paths(data: dict[str, Any], backup: list[Any]) -> list[Any]:
    """`backup` with the paths that `data`'s own paths flag as backup (the flag taken off them)."""
    paths = []
    for index, path in enumerate(data.get("paths") or []):
        if isinstance(path, dict) and "backup" in path:
            path = dict(path)
            if path.pop("backup") and index not in backup:
                backup.append(index)
        paths.append(path)
    if paths:
        data["paths"] = paths
    return backup


def warn_moved(keys: list[str], origin: str) -> None:
    """Warns of each endpoint field (`cc`, `sysctls.X`, `paths.1.backup`, ...) that `origin`
    still sets, naming its new home."""
    for key in keys:
        parts = key.split(".")
        field = "backup" if parts[0] == "paths" and parts[-1] == "backup" else parts[0]
        if field in FIELDS:
            warn(f"{origin}: `{key}` is a deployment setting now, read for the time being; "
                 f"move it to {FIELDS[field]} (docs/deployments.md)")


def file_keys(data: dict[str, Any]) -> list[str]:
    """The endpoint fields a profile file's raw data sets."""
    keys = [k for k in data if k in FIELDS]
    keys += [f"paths.{i}.backup" for i, p in enumerate(data.get("paths") or [])
             if isinstance(p, dict) and "backup" in p]
    return keys

"""What the server adds to `mpstream doctor` (mpstream/hooks.py): whether nginx listens with
MPTCP itself or through mptcpize."""

from __future__ import annotations

from mpstream.doctor import Finding, find_program


def check_nginx_multipath() -> list[Finding]:
    if find_program("nginx") is None:
        return []
    from mpstream.server.nginx import supports_multipath_listen

    native = supports_multipath_listen()
    return [Finding("server", "nginx `listen ... multipath`", True,
                    "native" if native else
                    "not in this nginx (1.29.7+/1.30, freenginx 1.27.5+): mptcpize is used",
                    required=False)]

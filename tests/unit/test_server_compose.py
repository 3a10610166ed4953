"""docker-compose.yml's structure, and that every file, module and command it names exists in
the repository and accepts the arguments given (with the defaults of its ${VAR:-default}
settings). tests/compose runs the stack for real with podman."""

import re
import time
from pathlib import Path

import click
import pytest
import sqlalchemy as sa
import yaml

from mpstream.cli import SUBCOMMANDS, cli
from mpstream.server.app import create_app
from mpstream.server.nginx import launcher_parser

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
SETTING = re.compile(r"\$\{(\w+):-([^}]*)\}")


def defaults(value):
    """A compose value with each ${VAR:-default} replaced by its default."""
    if isinstance(value, list):
        return [defaults(v) for v in value]
    return SETTING.sub(lambda m: m.group(2), value)


def module_file(module: str) -> Path:
    """mpstream.server.nginx -> server/nginx.py (the package-dir mapping of pyproject.toml)."""
    parts = module.split(".")
    assert parts[0] == "mpstream", module
    folder = "mpstream" if parts[1] in ("cli", "errors", "paths") else parts[1]
    rest = parts[1:] if folder == "mpstream" else parts[2:]
    return REPO / folder / (("/".join(rest) or "__init__") + ".py")


def test_services_and_volumes():
    assert set(SERVICES) == {"encoder", "postgres", "collector", "nginx"}
    assert set(COMPOSE["volumes"]) == {"media", "qoe"}
    # the encoder writes the media volume, nginx reads the same one
    assert "media:/media" in SERVICES["encoder"]["volumes"]
    assert "media:/media:ro" in SERVICES["nginx"]["volumes"]
    assert SERVICES["nginx"]["depends_on"]["encoder"]["condition"] == (
        "service_completed_successfully"
    )
    assert SERVICES["collector"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "qoe:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]


def test_only_nginx_is_published_and_on_loopback_by_default():
    assert defaults(SERVICES["nginx"]["ports"]) == ["127.0.0.1:8080:8080"]
    assert [n for n in SERVICES if "ports" in SERVICES[n]] == ["nginx"]
    # the database and the collector have no route beyond the containers; the encoder no network
    assert COMPOSE["networks"]["backend"]["internal"] is True
    assert SERVICES["postgres"]["networks"] == ["backend"]
    assert SERVICES["collector"]["networks"] == ["backend"]
    assert SERVICES["encoder"]["network_mode"] == "none"


def test_mptcp_is_enabled_in_the_serving_container():
    assert SERVICES["nginx"]["sysctls"]["net.mptcp.enabled"] == "1"


def test_no_host_paths_are_mounted():
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source in COMPOSE["volumes"], f"{name}: {volume} mounts a host path"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_images_build_from_dockerfiles_in_the_repo(name):
    build = SERVICES[name]["build"]
    assert build["context"] == "."
    dockerfile = REPO / build["dockerfile"]
    assert dockerfile.is_file()
    text = dockerfile.read_text()
    # every stage starts from the base image argument, by default the registry's Debian 12
    assert defaults(build["args"]["BASE_IMAGE"]) == "debian:bookworm-slim"
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", text, re.M)
    assert set(re.findall(r"^FROM (\S+)", text, re.M)) == {"${BASE_IMAGE}"}
    for line in text.splitlines():
        m = re.match(r"COPY\s+(?!--from)(.+)\s+\S+$", line)
        if m:
            for src in m.group(1).split():
                assert (REPO / src).exists(), f"{dockerfile.name}: COPY {src} is not in the repo"


def test_dockerignore_keeps_local_state_out_of_the_build_context():
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "build", "results", "media", "**/node_modules",
                  "player/dist"):
        assert entry in ignored


def test_encoder_command_is_an_mpstream_command_with_valid_options():
    argv = defaults(SERVICES["encoder"]["command"])
    assert argv[0] == "mpstream" and argv[1] in SUBCOMMANDS
    command = cli.get_command(click.Context(cli), argv[1])
    command.make_context(argv[1], list(argv[2:]))  # raises on an unknown option


def test_collector_command_names_the_config_file_and_app_factory():
    argv = SERVICES["collector"]["command"]
    assert argv[:2] == ["gunicorn", "-c"] and (REPO / argv[2]).is_file()
    module, factory = argv[3].removesuffix("()").split(":")
    assert module_file(module).is_file() and factory == "create_app"
    env = SERVICES["collector"]["environment"]
    assert env["MPSTREAM_COLLECTOR_BIND"].endswith(":8081")
    url = sa.make_url(defaults(env["DATABASE_URL"]))
    pg = SERVICES["postgres"]["environment"]
    assert url.drivername == "postgresql+psycopg" and url.host == "postgres"
    assert (url.username, url.database) == (pg["POSTGRES_USER"], pg["POSTGRES_DB"])
    assert url.password == defaults(pg["POSTGRES_PASSWORD"])


def test_collector_healthcheck_is_a_real_route(tmp_path):
    test = SERVICES["collector"]["healthcheck"]["test"]
    path = re.search(r"http://[^/]+(/\S*)", " ".join(test)).group(1)
    client = create_app(f"sqlite:///{tmp_path / 'h.sqlite3'}").test_client()
    assert client.get(path).status_code == 200


def test_nginx_command_is_the_launcher_with_valid_arguments():
    argv = SERVICES["nginx"]["command"]
    assert argv[:3] == ["python", "-m", "mpstream.server.nginx"]
    assert module_file(argv[2]).is_file()
    args = launcher_parser().parse_args(defaults(argv[3:]))
    assert args.collector == "collector:8081" and str(args.media).startswith("/media/")
    assert args.listen.endswith(":8080")


def test_collector_waits_for_a_database_that_is_not_up_then_gives_up(tmp_path):
    from mpstream.server.storage import wait_for_database

    wait_for_database(f"sqlite:///{tmp_path / 'up.sqlite3'}", timeout_s=1)  # returns at once
    started = time.monotonic()
    with pytest.raises(sa.exc.OperationalError):
        # nothing listens on port 1 of the loopback
        wait_for_database("postgresql+psycopg://u:p@127.0.0.1:1/db", timeout_s=1.0,
                          interval_s=0.2)
    assert 1.0 <= time.monotonic() - started < 10


def test_the_compose_test_builds_every_image_the_file_runs():
    from tests.compose.stack import BUILT_SERVICES

    images = {s["image"] for s in SERVICES.values()}
    assert set(BUILT_SERVICES.values()) == images
    for service, image in BUILT_SERVICES.items():
        assert SERVICES[service]["image"] == image and "build" in SERVICES[service]

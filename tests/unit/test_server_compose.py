"""docker-compose.yml cannot run here (no Docker): check its structure, and that every file,
module and command it names exists in the repository and accepts the arguments given."""

import re
from pathlib import Path

import click
import pytest
import yaml

from mpstream.cli import SUBCOMMANDS, cli
from mpstream.server.app import create_app
from mpstream.server.nginx import launcher_parser

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def module_file(module: str) -> Path:
    """mpstream.server.nginx -> server/nginx.py (the package-dir mapping of pyproject.toml)."""
    parts = module.split(".")
    assert parts[0] == "mpstream", module
    folder = "mpstream" if parts[1] in ("cli", "errors", "paths") else parts[1]
    rest = parts[1:] if folder == "mpstream" else parts[2:]
    return REPO / folder / (("/".join(rest) or "__init__") + ".py")


def test_services_and_volumes():
    assert set(SERVICES) == {"encoder", "collector", "nginx"}
    assert set(COMPOSE["volumes"]) == {"media", "qoe"}
    # the encoder writes the media volume, nginx reads the same one
    assert "media:/media" in SERVICES["encoder"]["volumes"]
    assert "media:/media:ro" in SERVICES["nginx"]["volumes"]
    assert SERVICES["nginx"]["depends_on"]["encoder"]["condition"] == (
        "service_completed_successfully"
    )
    assert SERVICES["nginx"]["ports"] == ["8080:8080"]


@pytest.mark.parametrize("name", ["collector", "nginx"])
def test_mptcp_is_enabled_per_container(name):
    assert SERVICES[name]["sysctls"]["net.mptcp.enabled"] == "1"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_images_build_from_dockerfiles_in_the_repo(name):
    build = SERVICES[name]["build"]
    assert build["context"] == "."
    dockerfile = REPO / build["dockerfile"]
    assert dockerfile.is_file()
    for line in dockerfile.read_text().splitlines():
        m = re.match(r"COPY\s+(?!--from)(.+)\s+\S+$", line)
        if m:
            for src in m.group(1).split():
                assert (REPO / src).exists(), f"{dockerfile.name}: COPY {src} is not in the repo"


def test_encoder_command_is_an_mpstream_command_with_valid_options():
    argv = SERVICES["encoder"]["command"]
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
    assert env["DATABASE_URL"].startswith("sqlite:////data/")
    assert any(v.endswith(":/data") for v in SERVICES["collector"]["volumes"])


def test_collector_healthcheck_is_a_real_route(tmp_path):
    test = SERVICES["collector"]["healthcheck"]["test"]
    path = re.search(r"http://[^/]+(/\S*)", " ".join(test)).group(1)
    client = create_app(f"sqlite:///{tmp_path / 'h.sqlite3'}").test_client()
    assert client.get(path).status_code == 200


def test_nginx_command_is_the_launcher_with_valid_arguments():
    argv = SERVICES["nginx"]["command"]
    assert argv[:3] == ["python", "-m", "mpstream.server.nginx"]
    assert module_file(argv[2]).is_file()
    args = launcher_parser().parse_args(argv[3:])
    assert args.collector == "collector:8081" and str(args.media).startswith("/media/")
    assert args.listen.endswith(":8080")

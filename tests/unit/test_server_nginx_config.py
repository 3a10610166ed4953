"""The generated nginx configuration: its directives (their effect on real requests is tested
in tests/integration/test_server_stack.py), and that nginx itself accepts it."""

import re
from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.sending import SendOptions
from mpstream.server.nginx import NginxConfig, supports_multipath_listen
from mpstream.server.schemas import MAX_BODY_BYTES


@pytest.fixture
def config(tmp_path):
    media = tmp_path / "media"
    media.mkdir()
    return NginxConfig(
        workdir=tmp_path / "work", media_root=media, listen="127.0.0.1:18080",
        collector_socket=tmp_path / "work" / "collector.sock",
    )  # fmt: skip


def directives(text: str) -> set[str]:
    return {" ".join(line.split()) for line in text.splitlines()}


def test_rendered_directives(config):
    d = directives(config.render())
    for expected in (
        "sendfile on;", "tcp_nopush off;", "tcp_nodelay on;", "server_tokens off;",
        "autoindex off;",
        "keepalive_timeout 65s;", f"client_max_body_size {MAX_BODY_BYTES};",
        "limit_req_status 429;",
        "access_log " + str(config.access_log) + " mpstream_json;",
        "proxy_pass http://collector;",
    ):  # fmt: skip
        assert expected in d, expected
    text = config.render()
    assert re.search(r"limit_req zone=api burst=\d+ nodelay;", text)
    assert f"server unix:{config.collector_socket};" in text
    assert "listen 127.0.0.1:18080 backlog=4096;" in d
    # nothing of the system's nginx is used
    assert "/etc/nginx" not in text and "/var/lib/nginx" not in text and "/var/log" not in text


def test_multipath_listen_when_asked(config, tmp_path):
    mp = NginxConfig(**{**config.__dict__, "multipath": True})
    assert "listen 127.0.0.1:18080 multipath backlog=4096;" in directives(mp.render())


def test_send_options_reach_nginx(config, tmp_path):
    sent = NginxConfig(**{**config.__dict__,
                          "send": SendOptions(tcp_nopush=True, tcp_nodelay=False, sndbuf="4M")})
    d = directives(sent.render())
    assert {"tcp_nopush on;", "tcp_nodelay off;"} <= d
    assert "listen 127.0.0.1:18080 backlog=4096 sndbuf=4m;" in d
    sent.write()  # nginx -t accepts them


@pytest.mark.parametrize("size", ["lots", "0", "4g", "-1", ""])
def test_send_buffer_sizes_nginx_cannot_read_are_refused(size):
    with pytest.raises(ValueError, match="not a size nginx reads"):
        SendOptions(sndbuf=size)


def test_nginx_accepts_the_configuration(config):
    path = config.write()  # runs `nginx -t`; raises with nginx's message otherwise
    assert path.is_file() and (config.workdir / "tmp" / "body").is_dir()


def test_a_low_latency_origin_is_reached_for_what_is_no_file_and_compresses_playlists(config):
    origin = NginxConfig(**{**config.__dict__, "origin_socket": config.workdir / "origin.sock"})
    text = origin.render()
    block = text[text.index("location @origin"):]
    block = block[:block.index("\n        }\n")]  # the location's own closing brace
    d = directives(block)
    assert {"gzip on;", "gzip_types application/vnd.apple.mpegurl;", "gzip_proxied any;",
            "proxy_buffering off;"} <= d
    assert "error_page 404 = @origin;" in directives(text)
    assert "location @origin" not in config.render()
    assert origin.write().is_file()  # nginx -t accepts it


def test_a_low_latency_stream_answers_its_own_clock(config):
    def time_block(text: str) -> set[str]:
        block = text[text.index("location = /api/time"):]
        return directives(block[:block.index("\n        }\n")])

    origin = NginxConfig(**{**config.__dict__, "origin_socket": config.workdir / "origin.sock"})
    assert f"proxy_pass http://unix:{config.workdir / 'origin.sock'}:;" in time_block(
        origin.render())
    plain = time_block(config.render())
    assert not any(d.startswith("proxy_pass") for d in plain)
    assert any(d.startswith("return 200") for d in plain)


def test_the_multipath_probe_says_whether_nginx_takes_our_multipath_listen(config):
    # The probe (a throwaway configuration) decides whether `serve` writes `listen ...
    # multipath` or wraps nginx in mptcpize; whichever nginx is installed, the project's own
    # configuration with that listen must meet the probe's answer.
    mp = NginxConfig(**{**config.__dict__, "multipath": True})
    if supports_multipath_listen():
        mp.write()  # nginx -t accepts it
    else:
        with pytest.raises(UserError, match='"multipath"'):
            mp.write()
        assert Path("/usr/bin/mptcpize").exists(), "no multipath listen and no mptcpize"

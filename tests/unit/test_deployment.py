"""Deployments (mpstream/deployment.py): the presets, a file written and read back, the
refusals that name the setting, and the move of today's endpoint fields out of profiles."""

import textwrap

import pytest

from mpstream.deployment import (
    DEFAULT_DEPLOYMENT,
    Deployment,
    deployment_from_dict,
    load_deployment,
    preset_names,
)
from mpstream.errors import UserError
from mpstream.netem.profile import load_profile, profile_from_dict
from mpstream.runner.scenario import parse_scenario

TWO_PATHS = {"paths": [{"name": "fast", "rate": "25mbit"}, {"name": "slow", "rate": "5mbit"}]}


def test_the_shipped_presets_load_and_kernel_default_is_the_kernels_settings():
    assert {"kernel-default", "mptcp-tuned", "mptcp-tuned-server", "mptcp-live"} <= set(
        preset_names())
    default = load_deployment(DEFAULT_DEPLOYMENT)
    assert default.model_dump(exclude={"name", "description", "source"}) == \
        Deployment().model_dump(exclude={"name", "description", "source"})
    for name in preset_names():
        assert load_deployment(name).name == name


def test_the_server_only_preset_sets_nothing_at_the_client():
    server_only = load_deployment("mptcp-tuned-server")
    assert server_only.client == Deployment().client
    assert server_only.server != Deployment().server


def test_a_deployment_written_as_toml_reads_back_the_same(tmp_path):
    original = deployment_from_dict({
        "name": "mine", "description": "two lines\nand a \"quote\"", "path_policy": "backup",
        "server": {"cc": "bbr", "sysctls": {"net.ipv4.tcp_rto_max_ms": 1000},
                   "nginx": {"sndbuf": "4m"}},
        "client": {"backup": ["slow", 0], "mptcp": {"path_manager": "userspace"}}})
    path = tmp_path / "mine.toml"
    path.write_text(original.to_toml())
    again = load_deployment(path)
    assert again.model_dump() == original.model_dump()
    assert again.source == path.resolve()


@pytest.mark.parametrize("data, named", [
    ({"server": {"ccc": "bbr"}}, "server.ccc: unknown setting"),
    ({"client": {"sysctls": {"kernel.panic": 1}}}, "'kernel.panic' is not a per-namespace"),
    ({"path_policy": "sometimes"}, "'sometimes' is no path policy: choose one of always"),
    ({"client": {"mptcp": {"path_manager": "mptcpd"}}}, "client.mptcp.path_manager"),
])
def test_a_bad_setting_is_refused_naming_it(data, named):
    with pytest.raises(UserError) as info:
        deployment_from_dict(data)
    assert named in str(info.value)


def test_an_unknown_preset_names_the_presets():
    with pytest.raises(UserError) as info:
        load_deployment("mptcp-fastest")
    assert "kernel-default" in str(info.value) and "mpstream list deployments" in str(info.value)


def test_a_profiles_endpoint_fields_move_to_its_deployment_with_a_warning(tmp_path, capsys):
    path = tmp_path / "old.toml"
    path.write_text(textwrap.dedent("""
        cc = "bbr"
        sysctls = { "net.ipv4.tcp_rto_max_ms" = 1000 }
        [server]
        tcp_nopush = true
        [mptcp]
        scheduler = "default"
        subflows = 3
        checksum = true
        [[paths]]
        rate = "25mbit"
        [[paths]]
        rate = "5mbit"
        backup = true
        """))
    profile = load_profile(path)
    dep = profile.deployment
    assert dep.server.cc == dep.client.cc == "bbr" == profile.cc
    assert dep.server.sysctls == dep.client.sysctls == {"net.ipv4.tcp_rto_max_ms": 1000}
    assert dep.server.nginx.tcp_nopush is True
    assert dep.server.mptcp.checksum and dep.client.mptcp.checksum
    assert dep.client.mptcp.subflows == 3
    assert dep.client.backup == [1] and profile.paths[1].backup
    said = capsys.readouterr().err
    for field, home in [("cc", "server.cc"), ("sysctls", "server.sysctls"),
                        ("server", "server.nginx"), ("mptcp", "client.mptcp"),
                        ("paths.1.backup", "client.backup")]:
        assert f"`{field}` is a deployment setting now" in said and home in said, field


def test_a_named_deployment_replaces_the_profiles_and_a_set_changes_it():
    plain = load_profile("thesis-bandwidth-unbalanced")
    assert plain.deployment.name == DEFAULT_DEPLOYMENT and plain.cc == "cubic"
    tuned = load_profile("thesis-bandwidth-unbalanced", deployment="mptcp-tuned")
    assert tuned.deployment.model_dump() == load_deployment("mptcp-tuned").model_dump()
    changed = load_profile("thesis-bandwidth-unbalanced", {"deployment.server.cc": "reno"},
                           deployment="mptcp-tuned")
    assert changed.cc == "reno"
    assert changed.deployment.server.sysctls == tuned.deployment.server.sysctls
    # A profile object again, with another deployment: the network stays, the ends change.
    again = load_profile(tuned, deployment="kernel-default")
    assert again.paths == plain.paths and again.deployment.server.sysctls == {}


def test_backup_paths_by_name_and_an_unknown_one_refused():
    profile = profile_from_dict({**TWO_PATHS, "deployment": {"client": {"backup": ["slow"]}}})
    assert [p.backup for p in profile.paths] == [False, True]
    with pytest.raises(UserError) as info:
        profile_from_dict({**TWO_PATHS, "deployment": {"client": {"backup": ["wifi"]}}})
    assert "deployment.client.backup: no path named 'wifi' (named paths: fast, slow)" in \
        str(info.value)
    with pytest.raises(UserError) as info:
        profile_from_dict({**TWO_PATHS, "deployment": {"client": {"backup": [0, 1]}}})
    assert "at least one path must not be a backup path" in str(info.value)


def _scenario(tmp_path, condition):
    (tmp_path / "p.toml").write_text('[[paths]]\nrate = "10mbit"\n[[paths]]\nrate = "5mbit"\n')
    (tmp_path / "mine.toml").write_text('path_policy = "backup"\n[server]\ncc = "bbr"\n')
    raw = {"name": "t", "media": {"source": "synthetic"},
           "conditions": [{"label": "a", "profile": "p.toml", **condition}]}
    return parse_scenario(raw, base_dir=tmp_path)


def test_a_condition_names_a_deployment_file_beside_the_scenario(tmp_path):
    scenario = _scenario(tmp_path, {"deployment": "mine.toml"})
    cond = scenario.conditions[0]
    assert cond.path_policy == "backup"  # the deployment's, as the condition names none
    profile = scenario.resolved(cond).network
    assert profile.cc == "bbr" and profile.deployment.name == "mine"
    own = _scenario(tmp_path, {"deployment": "mine.toml", "path_policy": "always"})
    assert own.conditions[0].path_policy == "always"  # the condition's own wins

"""The adaptation rules' one catalog (player/src/abr/catalog.json): the command line, the
events' model and the page read the same names, and a catalog that does not match the rules'
modules, or does not hold together, is refused with what is wrong (docs/abr.md)."""

import json

import pytest
from pydantic import ValidationError

from mpstream.errors import UserError
from mpstream.player.abr import RULES_DIR, catalog, check_rule_modules, default_abr
from mpstream.qoe.abrcatalog import CatalogError, abr_catalog, our_rules
from mpstream.qoe.events import AbrDecisionData


def test_every_player_offers_our_rules_after_its_own():
    found = abr_catalog()
    for player, rules in catalog().items():
        own = [r.name for r in rules.values() if r.kind == "player"]
        assert list(rules) == [*found.players[player].rules, *our_rules()]
        assert own == list(found.players[player].rules)
        assert default_abr(player) in own
        for name in our_rules():
            assert rules[name].params == found.ours[name].params


def test_each_rule_of_ours_has_its_module_and_no_module_is_unnamed():
    assert {p.stem for p in RULES_DIR.glob("*.js")} == set(our_rules())


def test_the_events_model_takes_the_catalogs_rules_of_ours_only():
    data = {"inputs": {"ladder_bps": [1e6], "buffer_s": 0.0, "segment_s": 2.0, "previous": None,
                       "past": []},
            "params": {}, "index": 0, "bitrate": 1e6, "estimate_bps": None}
    for name in our_rules():
        assert AbrDecisionData.model_validate({**data, "rule": name}).rule == name
    with pytest.raises(ValidationError, match="Input should be 'bba0', 'robustmpc'"):
        AbrDecisionData.model_validate({**data, "rule": "dynamic"})  # dash.js's own: not ours


def test_a_rule_without_its_module_or_a_module_without_its_rule_is_refused(tmp_path):
    (tmp_path / "bba0.js").write_text("export function decide() {}\n")
    check_rule_modules(("bba0",), tmp_path)
    missing = r"names newrule among our rules, but .* has no newrule\.js"
    with pytest.raises(UserError, match=missing):
        check_rule_modules(("bba0", "newrule"), tmp_path)
    (tmp_path / "stray.js").write_text("export function decide() {}\n")
    unnamed = r"stray\.js: a rule module that catalog\.json does not name"
    with pytest.raises(UserError, match=unnamed):
        check_rule_modules(("bba0",), tmp_path)


def _catalog(folder, **changes):
    """A catalog file of its own (each is read once: abr_catalog caches by path)."""
    raw = {"players": {"dashjs": {"default": "dynamic", "rules": {"dynamic": {"about": "its"}}}},
           "ours": {"bba0": {"about": "ours", "params": ["reservoirS"]}}}
    raw.update(changes)
    folder.mkdir()
    path = folder / "catalog.json"
    path.write_text(json.dumps(raw))
    return path


def test_a_catalog_that_does_not_hold_together_is_refused(tmp_path):
    assert our_rules(_catalog(tmp_path / "good")) == ("bba0",)
    bad_default = {"dashjs": {"default": "bola", "rules": {"dynamic": {"about": "its"}}}}
    with pytest.raises(CatalogError, match="dashjs's default 'bola' is not one of its own"):
        abr_catalog(_catalog(tmp_path / "default", players=bad_default))
    twice = {"dashjs": {"default": "bba0", "rules": {"bba0": {"about": "its"}}}}
    with pytest.raises(CatalogError, match="bba0: a name of ours and of dashjs's own"):
        abr_catalog(_catalog(tmp_path / "twice", players=twice))
    with pytest.raises(CatalogError, match=r"catalog\.json: .*kind"):
        abr_catalog(_catalog(tmp_path / "kind", ours={"bba0": {"about": "x", "kind": "ours"}}))
    with pytest.raises(CatalogError, match=r"catalog\.json: .*params"):
        abr_catalog(_catalog(tmp_path / "param", ours={"bba0": {"about": "x", "params": ["a b"]}}))

"""``Session.plugin_state``: the object a plugin keeps for one session in this process
(declared in veil.core.session_api.PluginSession)."""

from __future__ import annotations


class Tally:
    """A plugin's per-session object: counts how often its factory ran."""

    made = 0

    def __init__(self) -> None:
        Tally.made += 1
        self.seen: list[str] = []


def test_plugin_state_is_made_once_per_session_and_plugin_and_never_stored(make_veil):
    Tally.made = 0
    veil = make_veil([])
    one, two = veil.new_session(), veil.new_session()
    assert one.plugin_state("veil_x") is None  # without a factory nothing is made

    state = one.plugin_state("veil_x", Tally)
    state.seen.append("a")
    assert one.plugin_state("veil_x", Tally) is state and Tally.made == 1
    assert one.plugin_state("veil_x") is state
    assert one.plugin_state("veil_y") is None  # another plugin's namespace is its own
    other = two.plugin_state("veil_x", Tally)  # and so is another session's
    assert other is not state and other.seen == [] and Tally.made == 2

    one.save_state()
    assert "veil_x" not in one.state  # not the persisted ``state``
    resumed = veil.load_session(one.id)
    assert resumed.plugin_state("veil_x") is None  # this process's only: a resume starts anew

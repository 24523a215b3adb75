"""banyan.backends: what backend= takes, "auto" and then core's registry of backends in order of preference
(core/device/backend_registry.hpp), the order in which `banyan devices` lists them."""
import banyan
import numpy as np
import pytest


def test_backends_are_the_registry_s_in_order():
    assert banyan.backends[0] == "auto"
    assert banyan.backends[1:] == banyan._banyan.backends
    assert "backends" in banyan.__all__
    assert {d["backend"] for d in banyan.devices()} <= set(banyan.backends[1:])


def test_cli_lists_the_same_backends_in_the_same_order(cli):
    listed = []
    for line in cli("devices").stdout.splitlines()[1:]:
        word = line.split()[0] if line.strip() else ""
        if word in banyan.backends[1:] and word not in listed:
            listed.append(word)
    assert tuple(listed) == banyan.backends[1:]


def test_an_unknown_backend_is_refused_naming_every_one():
    pos, mass = np.zeros((2, 3)), np.ones(2)
    pos[1, 0] = 1.0
    with pytest.raises(banyan.UsageError, match="got 'metal'") as e:
        banyan.gravity(pos, mass, backend="metal")
    assert all(f"'{b}'" in str(e.value) for b in banyan.backends)

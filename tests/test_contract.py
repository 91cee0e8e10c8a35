"""The written contract of the networks (`neural.families`: `Network`, and `WindowNetwork` or
`StreamingNetwork` by context) and of the output layers (`neural.outputs.layers.OutputLayer`), checked
over the registries: every registered family's class and every objective's output layer has every
member its protocol names, implemented (not the base's placeholder). What the members must do is tested
over the same registries in tests/test_nplm_families.py and tests/test_stream_networks.py."""

import inspect

import pytest

from neural.config import OBJECTIVES
from neural.families import FAMILIES, PROTOCOLS, Network, load
from neural.outputs.layers import OutputLayer


def members(protocol: type) -> set[str]:
    """The names a protocol asks for: its methods and annotated attributes, with its bases'."""
    names = set()
    for cls in protocol.__mro__:
        if cls is object or not getattr(cls, "_is_protocol", False) or cls.__name__ == "Protocol":
            continue
        names |= {name for name in vars(cls) if not name.startswith("_")} | set(getattr(cls, "__annotations__", {}))
    return names


def test_the_protocols_name_what_every_network_has_and_what_its_context_adds():
    common = members(Network)
    assert {"loss", "sampled_scores", "set_unigram_biases", "WORD_TABLES", "history"} <= common
    assert {"features", "forward", "log_probs"} <= members(PROTOCOLS["window"]) - common
    assert {"encode", "score_stream", "log_distribution", "log_probs"} <= members(PROTOCOLS["stream"]) - common


def implemented(cls: type, name: str) -> bool:
    """`cls` has `name`, and a method of that name is not a base class's placeholder (a body that raises
    NotImplementedError)."""
    found = getattr(cls, name, None)
    if found is None:
        return False
    if not inspect.isfunction(inspect.unwrap(found)):
        return True
    return "raise NotImplementedError" not in inspect.getsource(inspect.unwrap(found))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_implements_its_protocol(name):
    entry = FAMILIES[name]
    network = entry.network_class()
    instance_attributes = {"shape", "vocab_size", "num_classes", "history", "WORD_TABLES"}  # set by __init__
    missing = [member for member in sorted(members(PROTOCOLS[entry.context]))
               if not implemented(network, member) and member not in instance_attributes]
    assert missing == [], f"{network.__name__} lacks {missing}"
    if entry.context == "stream":
        encode = inspect.signature(network.encode)
        assert list(encode.parameters)[:3] == ["self", "inputs", "state"]
        assert network.history is None
    parameters = inspect.signature(network.__init__).parameters
    assert {"shape", "vocab_size", "output", "structure", "dropout"} <= set(parameters)


@pytest.mark.parametrize("name", sorted(name for name, o in OBJECTIVES.items() if o.layer))
def test_every_output_layer_implements_its_base(name):
    layer = load(OBJECTIVES[name].layer)
    assert issubclass(layer, OutputLayer)
    for member in ("loss", "log_probs", "scores", "decay_parameters", "bias_parameters", "set_unigram_biases"):
        assert getattr(layer, member, None) is not getattr(OutputLayer, member, None), (name, member)


def test_a_stream_family_without_the_stream_recipe_is_refused_when_it_registers():
    """A stream family whose shape forgot the stream networks' recipe would train under the window recipes'
    defaults and be refused for options its user never gave; registering it names the base to subclass."""
    from dataclasses import dataclass
    import pytest
    from neural.families import Family, NetworkShape, register
    from neural.networks.lstm import LSTMNetwork

    @dataclass(frozen=True)
    class Forgetful(NetworkShape):
        h: int = 4

    with pytest.raises(ValueError, match="subclasses neural.networks.stream.StreamShape"):
        register(Family("forgetful", Forgetful, LSTMNetwork, context="stream"))
    assert "forgetful" not in FAMILIES

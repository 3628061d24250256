"""Tests for costs.specs.graph: Block and ModelParallel expansion, ordering, and spec errors.

Spec errors are checked on files written to tmp_path and loaded the way planner loads them
(``load_spec`` then ``build_net`` with the file name as the source): each must be a one-line
:class:`costs.errors.SpecError` that names the file and, where there is one, the layer.
"""

from __future__ import annotations

import copy
import json

import pytest

from costs.errors import PlannerError, SpecError
from costs.rules import PALEO_2016, PALEO_2018
from costs.specs import layers
from costs.specs.graph import build_net, expand, load_spec, toposort

DATA = {"type": "Input", "parents": [], "tensor": [2, 8, 8, 4]}


def net_of(layers_: dict, rules=PALEO_2018, source="t.json"):
    return build_net({"name": "t", "layers": {"data": DATA, **layers_}}, source, rules)


def names(net) -> list[str]:
    return [s.name for s in net.layers]


def parents(net, name) -> tuple[str, ...]:
    return net[name].layer.parents


def assert_topological(net):
    seen = set()
    for s in net.layers:
        assert set(s.layer.parents) <= seen, f"{s.name} comes before a parent"
        seen.add(s.name)


# ---- Block -------------------------------------------------------------------------------------

BLOCK_SPEC = {
    "blk": {
        "type": "Block",
        "parents": ["data"],
        "endpoint": "cat",
        "layers": {
            "a": {"type": "Convolution", "parents": [], "filter": [1, 1, 4, 3]},
            "b": {"type": "Convolution", "parents": [], "filter": [3, 3, 4, 5]},
            "inner": {
                "type": "Block",
                "parents": ["b"],
                "endpoint": "r",
                "layers": {"r": {"type": "ReLU", "parents": []}},
            },
            "cat": {"type": "Concatenate", "parents": ["a", "inner"], "dim": 3},
        },
    },
    "after": {"type": "ReLU", "parents": ["blk"]},
    "out": {"type": "Softmax", "parents": ["after"]},
}


def test_block_names_sublayers_block_slash_sub():
    net = net_of(copy.deepcopy(BLOCK_SPEC))
    assert names(net) == ["data", "blk/a", "blk/b", "blk/inner/r", "blk/cat", "after", "out"]
    assert not any(s.type == "Block" for s in net.layers)


def test_block_empty_parents_inherit_the_blocks_parents():
    net = net_of(copy.deepcopy(BLOCK_SPEC))
    assert parents(net, "blk/a") == ("data",)
    assert parents(net, "blk/b") == ("data",)
    # Nested: the inner block's parents are names inside the outer block.
    assert parents(net, "blk/inner/r") == ("blk/b",)


def test_block_local_parents_resolve_inside_the_block():
    net = net_of(copy.deepcopy(BLOCK_SPEC))
    # "inner" names a nested block: it resolves to that block's endpoint.
    assert parents(net, "blk/cat") == ("blk/a", "blk/inner/r")
    assert net["blk/cat"].out_shape == (8, 8, 8)


def test_naming_a_block_resolves_to_its_endpoint():
    net = net_of(copy.deepcopy(BLOCK_SPEC))
    assert parents(net, "after") == ("blk/cat",)
    assert net["after"].in_shapes == ((8, 8, 8),)


def test_block_whose_endpoint_is_a_block_resolves_through_it():
    spec = {
        "outer": {
            "type": "Block",
            "parents": ["data"],
            "endpoint": "inner",
            "layers": {
                "inner": {
                    "type": "Block",
                    "parents": [],
                    "endpoint": "r",
                    "layers": {"r": {"type": "ReLU", "parents": []}},
                }
            },
        },
        "next": {"type": "ReLU", "parents": ["outer"]},
    }
    net = net_of(spec)
    assert parents(net, "outer/inner/r") == ("data",)
    assert parents(net, "next") == ("outer/inner/r",)


def test_absolute_reference_into_a_block():
    spec = copy.deepcopy(BLOCK_SPEC)
    spec["side"] = {"type": "ReLU", "parents": ["blk/b"]}
    net = net_of(spec)
    assert parents(net, "side") == ("blk/b",)


def test_block_without_endpoint_or_layers_is_an_error():
    bad = {
        "blk": {
            "type": "Block",
            "parents": ["data"],
            "endpoint": "zz",
            "layers": {"a": {"type": "ReLU", "parents": []}},
        }
    }
    with pytest.raises(SpecError, match=r"t\.json: layer 'blk': endpoint 'zz'.*\(a\)"):
        net_of(bad)
    empty = {"blk": {"type": "Block", "parents": ["data"], "endpoint": "a", "layers": {}}}
    with pytest.raises(SpecError, match="non-empty 'layers'"):
        net_of(empty)


# ---- ModelParallel -----------------------------------------------------------------------------

MP_SPEC = {
    "mp": {
        "type": "ModelParallel",
        "parents": ["data"],
        "splits": 2,
        "endpoint": "fc2",
        "layers": {
            "fc": {"type": "Convolution", "parents": [], "filter": [1, 1, 4, 6]},
            "cat": {"type": "Concatenate", "parents": ["fc@all"], "dim": 3},
            "fc2": {"type": "Convolution", "parents": ["cat@self"], "filter": [1, 1, 6, 4]},
            "ip": {"type": "InnerProduct", "parents": ["fc2"], "num_outputs": 10},
        },
    },
    "gather": {"type": "Concatenate", "parents": ["mp/fc2@all"], "dim": 3},
    "via_block": {"type": "Concatenate", "parents": ["mp"], "dim": 3},
    "out": {"type": "Softmax", "parents": ["gather"]},
}


def test_model_parallel_copies_named_at_i():
    net = net_of(copy.deepcopy(MP_SPEC))
    for sub in ("fc", "cat", "fc2", "ip"):
        for i in range(2):
            s = net[f"mp/{sub}@{i}"]
            assert s.layer.device == i
            assert s.layer.splits == 2
    assert not any(n.startswith("mp/") and "@" not in n for n in names(net))
    assert net["gather"].layer.device is None
    assert net.has_model_parallel


def test_model_parallel_splits_output_channels():
    net = net_of(copy.deepcopy(MP_SPEC))
    assert net["mp/fc@0"].out_shape == (8, 8, 3)  # 6 // 2
    assert net["mp/fc2@1"].out_shape == (8, 8, 2)  # 4 // 2
    assert net["mp/ip@0"].out_shape == (5,)  # 10 // 2
    # Parameters follow the split: kh kw C (K/S) + K/S.
    assert layers.params(net["mp/fc@0"]) == 1 * 1 * 4 * 3 + 3
    assert layers.params(net["mp/fc2@0"]) == 1 * 1 * 6 * 2 + 2
    assert layers.params(net["mp/ip@1"]) == (8 * 8 * 2) * 5 + 5


def test_model_parallel_self_and_all_parents():
    net = net_of(copy.deepcopy(MP_SPEC))
    assert parents(net, "mp/fc@0") == ("data",)  # [] inherits the block's parents
    assert parents(net, "mp/fc@1") == ("data",)
    assert parents(net, "mp/cat@0") == ("mp/fc@0", "mp/fc@1")  # @all inside the block
    assert parents(net, "mp/cat@1") == ("mp/fc@0", "mp/fc@1")
    assert parents(net, "mp/fc2@0") == ("mp/cat@0",)  # @self
    assert parents(net, "mp/fc2@1") == ("mp/cat@1",)
    assert parents(net, "mp/ip@1") == ("mp/fc2@1",)  # a bare local name means @self
    assert net["mp/cat@0"].out_shape == (8, 8, 6)


def test_model_parallel_gather_after_the_block():
    net = net_of(copy.deepcopy(MP_SPEC))
    assert parents(net, "gather") == ("mp/fc2@0", "mp/fc2@1")  # block/x@all
    assert parents(net, "via_block") == ("mp/fc2@0", "mp/fc2@1")  # naming the block
    assert net["gather"].out_shape == (8, 8, 4)


@pytest.mark.parametrize("splits", [0, -1, "2", 1.5])
def test_model_parallel_bad_splits(splits):
    spec = copy.deepcopy(MP_SPEC)
    spec["mp"]["splits"] = splits
    with pytest.raises(SpecError, match=r"t\.json: layer 'mp': 'splits' must be a positive integer"):
        net_of(spec)


def test_model_parallel_four_splits():
    spec = copy.deepcopy(MP_SPEC)
    spec["mp"]["splits"] = 4
    spec["mp"]["layers"]["fc"]["filter"] = [1, 1, 4, 8]
    spec["mp"]["layers"]["fc2"]["filter"] = [1, 1, 8, 4]
    net = net_of(spec)
    assert parents(net, "mp/cat@3") == tuple(f"mp/fc@{i}" for i in range(4))
    assert parents(net, "gather") == tuple(f"mp/fc2@{i}" for i in range(4))
    assert net["mp/fc@2"].out_shape == (8, 8, 2)


# ---- ordering ----------------------------------------------------------------------------------


def test_topological_order_is_valid_and_deterministic():
    for spec in (BLOCK_SPEC, MP_SPEC):
        orders = {tuple(names(net_of(copy.deepcopy(spec)))) for _ in range(5)}
        assert len(orders) == 1
        assert_topological(net_of(copy.deepcopy(spec)))


def test_ties_are_broken_by_file_order():
    def order(first, second):
        spec = {
            first: {"type": "ReLU", "parents": ["data"]},
            second: {"type": "ReLU", "parents": ["data"]},
            "join": {"type": "Elementwise", "parents": [first, second]},
        }
        return names(net_of(spec))

    assert order("zeta", "alpha") == ["data", "zeta", "alpha", "join"]
    assert order("alpha", "zeta") == ["data", "alpha", "zeta", "join"]


def test_child_written_before_its_parent():
    spec = {
        "out": {"type": "Softmax", "parents": ["b"]},
        "b": {"type": "ReLU", "parents": ["a"]},
        "a": {"type": "ReLU", "parents": ["data"]},
    }
    net = build_net({"name": "t", "layers": {**spec, "data": DATA}}, "t.json", PALEO_2018)
    assert names(net) == ["data", "a", "b", "out"]


def test_model_parallel_order():
    assert names(net_of(copy.deepcopy(MP_SPEC))) == [
        "data",
        "mp/fc@0",
        "mp/fc@1",
        "mp/cat@0",
        "mp/fc2@0",
        "mp/ip@0",
        "mp/cat@1",
        "mp/fc2@1",
        "mp/ip@1",
        "gather",
        "via_block",
        "out",
    ]


def test_zoo_nets_are_topologically_ordered():
    from planner import catalog

    transformers = catalog.zoo_transformers() + [
        n for n, spec in catalog.zoo_info().items() if "vision" in spec
    ]
    for name in catalog.zoo():
        net = catalog.load_net(name, "planner" if name in transformers else "paleo-2018")
        assert_topological(net)
        assert net.layers[0].name == "data"
        assert len(set(names(net))) == len(net.layers)


def test_toposort_duplicate_names():
    from costs.specs.graph import Layer

    a = Layer("a", "ReLU", (), {})
    with pytest.raises(SpecError, match="s.json: layer 'a': duplicate layer name"):
        toposort([a, a], "s.json")


def test_expand_is_pure():
    spec = copy.deepcopy(MP_SPEC)
    before = json.dumps(spec, sort_keys=True)
    expand({"layers": {"data": DATA, **spec}}, "t.json")
    assert json.dumps(spec, sort_keys=True) == before


def test_default_batch_and_meta():
    net = build_net({"name": "tiny", "note": "x", "layers": {"data": DATA}}, "t.json", PALEO_2018)
    assert net.default_batch == 2
    assert net.name == "tiny"
    assert net.source == "t.json"
    assert net.meta == {"name": "tiny", "note": "x"}


# ---- spec errors from files ----------------------------------------------------------------------


def write(tmp_path, text: str, name="spec.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path, rules=PALEO_2018):
    """Load a spec file as planner does: the file's name is the error source."""
    return build_net(load_spec(path), path.name, rules)


def spec_text(layers_: dict) -> str:
    return json.dumps({"name": "t", "layers": {"data": DATA, **layers_}}, indent=2)


def expect_error(path, *fragments, layer=None, rules=PALEO_2018) -> str:
    with pytest.raises(SpecError) as info:
        load(path, rules)
    err = info.value
    msg = str(err)
    assert isinstance(err, PlannerError) and err.exit_code == 2
    assert "\n" not in msg, msg
    assert path.name in msg, msg
    if layer is not None:
        assert f"layer '{layer}'" in msg, msg
        assert err.layer == layer
    for frag in fragments:
        assert frag in msg, msg
    return msg


def test_malformed_json_names_line_and_column(tmp_path):
    path = write(
        tmp_path, '{"name": "x", "layers": {\n  "data": {"type": "Input",\n    "parents": [],}\n}}\n'
    )
    msg = expect_error(path, "malformed JSON", "line 3", "column")
    assert msg.startswith(str(path))  # load_spec reports the path it read


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "nope.json")


def test_missing_parent_suggests_a_close_name(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "conv1": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 4, 8]},
                "pool": {"type": "Pooling", "parents": ["conv"], "ksize": [1, 2, 2, 1]},
            }
        ),
    )
    expect_error(path, "unknown parent 'conv'", "did you mean", "conv1", layer="pool")


def test_missing_parent_inside_a_block(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "blk": {
                    "type": "Block",
                    "parents": ["data"],
                    "endpoint": "r",
                    "layers": {
                        "relu": {"type": "ReLU", "parents": []},
                        "r": {"type": "ReLU", "parents": ["relu2"]},
                    },
                },
            }
        ),
    )
    expect_error(path, "unknown parent 'relu2'", "did you mean", layer="blk/r")


def test_unknown_layer_type_lists_valid_types(tmp_path):
    path = write(tmp_path, spec_text({"x": {"type": "Frobnicate", "parents": ["data"]}}))
    msg = expect_error(path, "'Frobnicate'", "paleo-2018", layer="x")
    for t in sorted(PALEO_2018.layer_types):
        assert t in msg


def test_unknown_layer_type_under_paleo_2016(tmp_path):
    path = write(tmp_path, spec_text({"x": {"type": "ReLU", "parents": ["data"]}}))
    msg = expect_error(path, "'ReLU'", "paleo-2016", layer="x", rules=PALEO_2016)
    assert "Convolution" in msg and "Softmax" in msg


def test_cycle(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {"type": "ReLU", "parents": ["data", "b"]},
                "b": {"type": "ReLU", "parents": ["a"]},
                "c": {"type": "ReLU", "parents": ["b"]},
            }
        ),
    )
    msg = expect_error(path, "cycle")
    assert "a" in msg.split("cycle", 1)[1] and "b" in msg.split("cycle", 1)[1]


def test_self_loop(tmp_path):
    path = write(tmp_path, spec_text({"a": {"type": "ReLU", "parents": ["a"]}}))
    expect_error(path, "cycle")


def test_concat_of_mismatched_maps(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 4, 4]},
                "b": {"type": "Pooling", "parents": ["data"], "ksize": [1, 2, 2, 1]},
                "cat": {"type": "Concatenate", "parents": ["a", "b"], "dim": 3},
            }
        ),
    )
    expect_error(path, "concatenate", "[8, 8, 4]", "[4, 4, 4]", layer="cat")


def test_elementwise_of_mismatched_maps(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 4, 6]},
                "sum": {"type": "Elementwise", "parents": ["a", "data"]},
            }
        ),
    )
    expect_error(path, "elementwise", layer="sum")


def test_filter_channel_mismatch(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 5, 6]},
            }
        ),
    )
    expect_error(path, "5 input channels", layer="a")


def test_bad_padding(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {"type": "Convolution", "parents": ["data"], "filter": [3, 3, 4, 6], "padding": "FULL"},
            }
        ),
    )
    expect_error(path, "padding", layer="a")


def test_impossible_reshape(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "r": {"type": "Reshape", "parents": ["data"], "output_shape": [-1, 7, 7]},
            }
        ),
    )
    expect_error(path, "reshape", layer="r")


def test_missing_field(tmp_path):
    path = write(tmp_path, spec_text({"a": {"type": "Convolution", "parents": ["data"]}}))
    expect_error(path, "filter", layer="a")


def test_empty_output_shape(tmp_path):
    path = write(
        tmp_path,
        spec_text(
            {
                "a": {
                    "type": "Convolution",
                    "parents": ["data"],
                    "filter": [11, 11, 4, 6],
                    "padding": "VALID",
                },
            }
        ),
    )
    expect_error(path, "output shape", "empty", layer="a")


def test_no_data_input(tmp_path):
    text = json.dumps(
        {
            "name": "t",
            "layers": {
                "input": DATA,
                "a": {"type": "ReLU", "parents": ["input"]},
            },
        }
    )
    expect_error(write(tmp_path, text), "Input layer named 'data'")


def test_data_that_is_not_an_input(tmp_path):
    text = json.dumps({"name": "t", "layers": {"data": {"type": "Generic", "parents": []}}})
    expect_error(write(tmp_path, text), "Input layer named 'data'")


def test_layer_without_type(tmp_path):
    path = write(tmp_path, spec_text({"a": {"parents": ["data"]}}))
    expect_error(path, "missing 'type'", layer="a")


@pytest.mark.parametrize("bad", ["data", [1], None])
def test_layer_with_bad_parents(tmp_path, bad):
    path = write(tmp_path, spec_text({"a": {"type": "ReLU", "parents": bad}}))
    expect_error(path, "'parents' must be a list", layer="a")


def test_layer_without_parent(tmp_path):
    path = write(tmp_path, spec_text({"a": {"type": "ReLU", "parents": []}}))
    expect_error(path, "needs a parent", layer="a")


def test_not_a_spec_object(tmp_path):
    expect_error(write(tmp_path, "[1, 2, 3]"), "'layers' object")
    expect_error(write(tmp_path, '{"name": "x"}', "b.json"), "'layers' object")


def test_bad_input_tensor(tmp_path):
    text = json.dumps(
        {"name": "t", "layers": {"data": {"type": "Input", "parents": [], "tensor": [2, 0, 8, 4]}}}
    )
    expect_error(write(tmp_path, text), "tensor", layer="data")

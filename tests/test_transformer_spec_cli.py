"""`python -m costs.specs.transformer_spec FILE`: regenerates a measurement net's layers byte for byte;
bad input gets one line and exit 2."""

from __future__ import annotations

import shutil

from costs.specs import transformer_spec
from planner import catalog


def test_rewrite_reproduces_every_shipped_measurement_net(tmp_path):
    for name, path in catalog.measurement_nets().items():
        copy = tmp_path / f"{name}.json"
        shutil.copy(path, copy)
        assert transformer_spec.main([str(copy)]) == 0
        assert copy.read_bytes() == path.read_bytes(), name


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": {}}')
    assert transformer_spec.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: ") and "d_model" in err and len(err.strip().splitlines()) == 1
    assert transformer_spec.main([str(tmp_path / "absent.json")]) == 2
    assert transformer_spec.main([]) == 2 and transformer_spec.main(["--help"]) == 0

"""tools/quantize_vs_tensorflow.py without TensorFlow: the float graph it hands to the TensorFlow
side is the model's, and a Python without TensorFlow is refused in one line."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("quantize_vs_tensorflow", ROOT / "tools" / "quantize_vs_tensorflow.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["lstm", "fused_lstm"])
def test_export_is_the_float_graph(tmp_path: Path, name: str) -> None:
    tool = _tool()
    from aot.quantize.graph import read_float_model
    model = tool.fm.ZOO[name]()
    cal = tool.fm.inputs_for(model, 4)
    tool.export(name, model, cal, cal[:2], tmp_path)
    graph = json.loads((tmp_path / "graph.json").read_text())
    g = read_float_model(model, name)
    assert [(op["name"], op["inputs"], op["outputs"]) for op in graph["ops"]] == \
        [(op.name, op.inputs, op.outputs) for op in g.ops]
    with np.load(tmp_path / "consts.npz") as z:
        assert sorted(z.files) == sorted(f"t{t.index}" for t in g.tensors if t.data is not None)
    np.testing.assert_array_equal(np.load(tmp_path / "eval.npy"), cal[:2])


def test_a_python_without_tensorflow_is_refused(capsys, tmp_path: Path) -> None:  # noqa: ANN001
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 1\n")  # a Python whose `import tensorflow` fails
    fake.chmod(0o755)
    with pytest.raises(SystemExit) as e:
        _tool().main(["--tf-python", str(fake), "--models", "lstm"])
    assert e.value.code == 2
    assert "not a Python that imports tensorflow" in capsys.readouterr().err

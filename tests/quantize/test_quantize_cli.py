"""`aot quantize` on the command line: the report it prints, and hostile input (one line, exit 2,
no output file)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import float_models as fm  # noqa: E402
from aot.cli import main  # noqa: E402
from aot.frontend.tflite import load_tflite  # noqa: E402

SHAPE = (1, 16, 16, 3)


@pytest.fixture(scope="module")
def files(tmp_path_factory):  # noqa: ANN001, ANN201
    d = tmp_path_factory.mktemp("q")
    model = d / "float.tflite"
    model.write_bytes(fm.small_cnn())
    np.save(d / "cal.npy", fm.samples(SHAPE, 40))
    return d, model


def _fails(capsys, argv: list[str], out: Path, *words: str) -> str:  # noqa: ANN001
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("aot: error:"), err
    for w in words:
        assert w in err, err
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    return err


def test_quantize_prints_the_accuracy(files, capsys) -> None:  # noqa: ANN001
    d, model = files
    out = d / "q.tflite"
    assert main(["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "int8 vs float on 4 held-out samples: output SNR" in text and "top-1 agreement" in text
    assert load_tflite(out.read_bytes()).inputs[0].type.dtype == "int8"


def test_a_folder_of_npy_and_eval_data(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    folder = tmp_path / "samples"
    folder.mkdir()
    for k, s in enumerate(fm.samples(SHAPE, 12, seed=3)):
        np.save(folder / f"{k:03d}.npy", s)  # one (16, 16, 3) sample per file
    np.savez(tmp_path / "eval.npz", images=fm.samples(SHAPE, 5, seed=4))
    out = tmp_path / "q.tflite"
    assert main(["quantize", str(model), "--calibration", str(folder), "--eval", str(tmp_path / "eval.npz"),
                 "-o", str(out), "--method", "percentile:99.9"]) == 0
    text = capsys.readouterr().out
    assert "calibrated on 12 samples" in text and "on 5 held-out samples" in text


def test_wrong_shape(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    np.save(tmp_path / "c.npy", np.zeros((10, 16, 16, 1), np.float32))
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "c.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "shape (10, 16, 16, 1)", "(samples, 16, 16, 3)")


def test_wrong_dtype(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    np.save(tmp_path / "c.npy", np.zeros((10, 16, 16, 3), np.uint8))
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "c.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "uint8", "float32")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_samples(files, capsys, tmp_path, bad: float) -> None:  # noqa: ANN001
    d, model = files
    x = fm.samples(SHAPE, 10)
    x[7, 3, 3, 1] = bad
    np.save(tmp_path / "c.npy", x)
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "c.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "sample 7", "NaN or infinite")


def test_empty_calibration_file(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    (tmp_path / "c.npy").write_bytes(b"")
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "c.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "empty")


def test_empty_model_file(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, _ = files
    (tmp_path / "m.tflite").write_bytes(b"")
    _fails(capsys, ["quantize", str(tmp_path / "m.tflite"), "--calibration", str(d / "cal.npy"),
                    "-o", str(tmp_path / "q.tflite")], tmp_path / "q.tflite", "empty")


def test_an_int8_model_given_again(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    once = tmp_path / "once.tflite"
    assert main(["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(once), "--no-eval"]) == 0
    capsys.readouterr()
    _fails(capsys, ["quantize", str(once), "--calibration", str(d / "cal.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "already quantized", "float32 model")


def test_an_op_it_cannot_quantize(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, _ = files
    n = fm.FloatNet(SHAPE)
    x = n.conv(n.input, 4)
    m = tmp_path / "exp.tflite"
    m.write_bytes(n.finish([n.unary("EXP", x)]))
    _fails(capsys, ["quantize", str(m), "--calibration", str(d / "cal.npy"), "-o", str(tmp_path / "q.tflite")],
           tmp_path / "q.tflite", "cannot quantize operator EXP")


def test_bad_method_and_output_name(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    _fails(capsys, ["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(tmp_path / "q.tflite"),
                    "--method", "percentile:200"], tmp_path / "q.tflite", "percentile")
    _fails(capsys, ["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(tmp_path / "q.bin")],
           tmp_path / "q.bin", "*.tflite")


def test_target_snr_and_layers_printout(capsys, tmp_path) -> None:  # noqa: ANN001
    m = tmp_path / "lt.tflite"
    m.write_bytes(fm.long_tail())
    np.save(tmp_path / "cal.npy", fm.samples((1, 12, 12, 4), 60))
    out = tmp_path / "q.tflite"
    assert main(["quantize", str(m), "--calibration", str(tmp_path / "cal.npy"), "-o", str(out),
                 "--target-snr", "20", "--layers"]) == 0
    text = capsys.readouterr().out
    assert "mixed precision: 2 of 7 operators int16 (16x8), target 20 dB reached" in text, text
    assert "promoted #" in text and "per-layer output SNR" in text and "int8/int16 vs float" in text
    assert "activation RAM: " in text and "bytes mixed (+" in text
    _fails(capsys, ["quantize", str(m), "--calibration", str(tmp_path / "cal.npy"), "-o", str(tmp_path / "r.tflite"),
                    "--target-snr", "20", "--holdout", "0"], tmp_path / "r.tflite", "needs evaluation samples")


def test_two_inputs_by_name(capsys, tmp_path) -> None:  # noqa: ANN001
    """A model with two inputs takes an .npz with one array per input name; a missing name is one line."""
    n = fm.FloatNet((1, 8, 8, 3))
    other = n.t((1, 8, 8, 3))
    s = n.binary("ADD", n.conv(n.input, 3, act="none"), other)
    n.b.set_inputs([n.input, other])
    n.b.set_outputs([n.fc(n.mean(s), 4)])
    m = tmp_path / "two.tflite"
    m.write_bytes(n.b.finish())
    a, b = fm.samples((1, 8, 8, 3), 20, seed=1), fm.samples((1, 8, 8, 3), 20, seed=2)
    np.savez(tmp_path / "cal.npz", t0=a, **{f"t{other}": b})
    out = tmp_path / "q.tflite"
    assert main(["quantize", str(m), "--calibration", str(tmp_path / "cal.npz"), "-o", str(out)]) == 0
    assert "held-out samples: output SNR" in capsys.readouterr().out
    assert [v.type.dtype for v in load_tflite(out.read_bytes()).inputs] == ["int8", "int8"]
    np.savez(tmp_path / "bad.npz", t0=a, x=b)
    _fails(capsys, ["quantize", str(m), "--calibration", str(tmp_path / "bad.npz"), "-o", str(tmp_path / "r.tflite")],
           tmp_path / "r.tflite", f"no calibration data for input 't{other}'")


def test_missing_files_and_empty_folder(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    out = tmp_path / "q.tflite"
    _fails(capsys, ["quantize", str(tmp_path / "none.tflite"), "--calibration", str(d / "cal.npy"), "-o", str(out)],
           out, "no such file")
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "none.npy"), "-o", str(out)],
           out, "no such file")
    (tmp_path / "empty").mkdir()
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "empty"), "-o", str(out)],
           out, "no .npy files")
    np.save(tmp_path / "zero.npy", np.zeros((0, 16, 16, 3), np.float32))
    _fails(capsys, ["quantize", str(model), "--calibration", str(tmp_path / "zero.npy"), "-o", str(out)],
           out, "holds no samples")


def test_html_report(files, capsys, tmp_path) -> None:  # noqa: ANN001
    d, model = files
    out, page = tmp_path / "q.tflite", tmp_path / "r.html"
    assert main(["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(out),
                 "--report", str(page)]) == 0
    assert f"report: {page}" in capsys.readouterr().out
    text = page.read_text()
    assert text.count("<tr><td>") == 8  # one row per operator of the small CNN (RELU6 fused)
    assert "<svg" in text and "held-out samples: output SNR" in text
    _fails(capsys, ["quantize", str(model), "--calibration", str(d / "cal.npy"), "-o", str(tmp_path / "s.tflite"),
                    "--report", str(tmp_path / "no" / "r.html")], tmp_path / "s.tflite", "no such folder")


def test_a_failed_run_leaves_an_existing_output_as_it_was(files, capsys, tmp_path) -> None:  # noqa: ANN001
    """Hostile input with -o naming a model written before: the old file is untouched."""
    d, model = files
    out = tmp_path / "q.tflite"
    out.write_bytes(b"earlier model")
    x = fm.samples(SHAPE, 6)
    x[1] = np.inf
    np.save(tmp_path / "c.npy", x)
    assert main(["quantize", str(model), "--calibration", str(tmp_path / "c.npy"), "-o", str(out)]) == 2
    assert "NaN or infinite" in capsys.readouterr().err
    assert out.read_bytes() == b"earlier model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.npy", "q.tflite"]

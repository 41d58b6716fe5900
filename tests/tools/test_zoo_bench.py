"""`aot bench --zoo` (aot.tools.zoo_bench): every zoo family has rows (int8 seeded and trained,
16x8 where TFLM has it), each row names an anchors.json architectures_m4 row that exists, the
selection and the table work, and (slow) one row measured end to end in QEMU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.cli import main as cli_main  # noqa: E402
from aot.errors import Error  # noqa: E402
from aot.tools import zoo, zoo_bench  # noqa: E402

ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors.json"


def test_every_family_has_seeded_and_trained_rows_and_16x8_where_tflm_has_it() -> None:
    cases = zoo_bench.zoo_cases()
    assert {c.family for c in cases} == set(zoo.MODELS)
    for fam in zoo.MODELS:
        assert {(c.activations, c.quant) for c in cases if c.family == fam and c.activations == "int8"} == \
            {("int8", "seeded"), ("int8", "trained")}
    assert {c.family for c in cases if c.activations == "int16"} == {"mobilenet_v2", "ds_cnn_large"}
    assert len({c.name for c in cases}) == len(cases)


def test_every_row_finds_its_anchor() -> None:
    if not ANCHORS.is_file():
        pytest.skip("../shared/anchors.json is not beside the repository")
    refs = zoo_bench.anchor_rows(ANCHORS)
    missing = [c.name for c in zoo_bench.zoo_cases() if c.anchor not in refs]
    assert not missing
    assert all(refs[c.anchor]["instructions"] > 0 for c in zoo_bench.zoo_cases())


def test_selection_by_row_or_family() -> None:
    assert [c.name for c in zoo_bench.select_cases("conv1d_trained,unet")] == ["unet", "unet_trained",
                                                                               "conv1d_trained"]
    assert len(zoo_bench.select_cases("ds_cnn_large")) == 4
    assert zoo_bench.select_cases("all") == zoo_bench.zoo_cases()
    with pytest.raises(Error, match="no zoo row nope"):
        zoo_bench.select_cases("nope")


def test_table_and_json_carry_the_ratio(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    seen = {}

    def fake(cases, board, anchors, **options):  # noqa: ANN001, ANN003, ANN202
        seen.update(board=board, names=[c.name for c in cases])
        return [zoo_bench.ZooRow(name="conv1d", family="conv1d", activations="int8", quant="seeded", board=board,
                                 macs=2000, instructions=1000, macs_per_instruction=2.0, ram_bytes=10,
                                 flash_bytes=20, model_file_bytes=5, flash_vs_model_file_bound=0.5,
                                 bit_exact_with_host=True, anchor_model="x", tflm_instructions=4000,
                                 ours_vs_tflm=0.25, tflm_arena_bytes=7)]
    monkeypatch.setattr(zoo_bench, "run_zoo_bench", fake)
    out = tmp_path / "z.json"
    assert cli_main(["bench", "--zoo", "conv1d", "--json", str(out)]) == 0
    assert seen == {"board": "mps2-an386", "names": ["conv1d", "conv1d_trained"]}
    assert "| conv1d | int8 | seeded | 2,000 | 1,000 | 2.00 |" in capsys.readouterr().out
    assert json.loads(out.read_text())["rows"][0]["ours_vs_tflm"] == 0.25
    assert cli_main(["bench", "x.tflite", "--zoo"]) == 2
    assert "drop the MODEL arguments" in capsys.readouterr().err
    assert cli_main(["bench", "--host"]) == 2
    assert "needs MODEL files (or --zoo" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_one_row_measured_in_qemu() -> None:
    rows = zoo_bench.run_zoo_bench(zoo_bench.select_cases("conv1d"), "mps2-an386", ANCHORS)
    for r in rows:
        assert r.bit_exact_with_host and r.instructions > 0 and r.macs > 1_000_000
        assert r.macs_per_instruction == round(r.macs / r.instructions, 3)
        if ANCHORS.is_file():
            assert r.ours_vs_tflm == round(r.instructions / r.tflm_instructions, 3)

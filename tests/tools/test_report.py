"""`aot report` and `aot sweep --html` opened in headless Chromium (Debian's `chromium`, installed
by `make setup`): the page loads without a console error, its charts are non-empty (a script in
the page checks them), every number it shows equals the JSON written beside it, and a screenshot
is taken (AOT_WRITE_DOCS=1 writes it to docs/report.png for the README). A build run patch by patch
(`--ram-budget`) gets its section: the compiler's stage records, the unpatched build beside it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aot.tools.report_svg import fmt, fmt_pct  # noqa: E402
from conftest import shared_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium missing: run `make setup` (Debian package chromium)")
    return exe


def run_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180)


def console_errors(stderr: str) -> list[str]:
    """Chromium logs the page's console messages as CONSOLE lines; errors are uncaught exceptions,
    console.error calls and resources that failed to load."""
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln and any(
        w in ln for w in ("Uncaught", "Error", "error", "Failed to load"))]


class Numbers(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str] = {}
        self.nums: list[tuple[str, Any, str]] = []  # (data-key, data-value, text) of each figure shown
        self.pct: set[str] = set()  # the data-keys shown as percentages
        self._open: tuple[str, Any] | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = {k: v or "" for k, v in a.items()}
        if tag == "span" and "data-key" in a:
            self._open, self._text = (a["data-key"], json.loads(a["data-value"])), ""
            if a.get("data-format") == "pct":
                self.pct.add(a["data-key"])

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._open is not None:
            self.nums.append((*self._open, self._text))
            self._open = None


def lookup(data: Any, key: str) -> Any:
    for part in key.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def check_page(page: Path, data: dict, tmp: Path, shot: Path | None = None) -> list[str]:
    """Load the page, return the data-keys it shows after checking each against `data`."""
    r = run_chromium(page, tmp / "profile-dom", "--dump-dom")
    assert r.returncode == 0, r.stderr[-2000:]
    assert console_errors(r.stderr) == []
    dom = Numbers()
    dom.feed(r.stdout)
    assert dom.body.get("data-selfcheck") == "ok", dom.body  # the page's script ran: every chart has shapes
    assert int(dom.body["data-charts"]) >= 1
    for key, value, text in dom.nums:
        assert value == lookup(data, key), key
        assert text == (fmt_pct(value) if key in dom.pct else fmt(value)), key
    if shot is not None:
        r = run_chromium(page, tmp / "profile-shot", "--hide-scrollbars", "--window-size=1100,2700",
                         f"--screenshot={shot}")
        assert r.returncode == 0, r.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    return [k for k, _, _ in dom.nums]


@pytest.mark.slow
def test_console_errors_are_caught(tmp_path: Path) -> None:
    """The check itself: a page with a script error is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    r = run_chromium(bad, tmp_path / "p", "--dump-dom")
    assert console_errors(r.stderr), r.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_report_and_sweep_pages(tmp_path: Path) -> None:
    model = shared_model("kws_int8.tflite")
    sw_json, sw_html = tmp_path / "sweep.json", tmp_path / "sweep.html"
    r = subprocess.run([sys.executable, "-m", "aot", "sweep", str(model), "--board", "mps2-an386", "--opt", "speed",
                        "--backend", "c", "--json", str(sw_json), "--html", str(sw_html), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    sweep = json.loads(sw_json.read_text())
    rep, rep_json = tmp_path / "report.html", tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "aot", "report", str(model), "--board", "mps2-an386", "-o", str(rep),
                        "--json", str(rep_json), "--sweep", str(sw_json)], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(rep_json.read_text())
    html = rep.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html  # no network
    # the report's own figures agree with the sweep's row of the same build
    row = sweep["rows"][0]
    for k in ("instructions", "flash_bytes", "ram_bytes", "pool_bytes", "stack_bytes", "code_bytes",
              "weights_bytes", "macs", "lower_bound_bytes"):
        assert data["summary"][k] == row[k], k
    assert sum(layer["macs"] for layer in data["layers"]) == data["summary"]["macs"]
    # per-layer instructions from `aot profile`: they add up to the whole run's (hooks cost a little)
    assert data["profile"] is True
    per_layer = sum(layer["instructions"] for layer in data["layers"])
    assert 0.9 * data["summary"]["instructions"] < per_layer <= 1.02 * data["summary"]["instructions"]
    assert len(data["layers"]) == len(data["plan"]["steps"]) == 12
    # not run patch by patch: the section is one line
    assert data["patch"] is None and data["ram_budget"] == "auto"
    assert "Patch-based execution: not used (--ram-budget auto)" in html and "<h2>Patch-based" not in html
    shot = tmp_path / "report.png"
    keys = check_page(rep, data, tmp_path, shot)
    assert {"summary.instructions", "summary.flash_bytes", "summary.ram_bytes", "sweep.0.instructions",
            "layers.0.macs", "layers.0.instructions"} <= set(keys)
    keys = check_page(sw_html, sweep, tmp_path)
    assert {"rows.0.instructions", "rows.0.bit_exact_with_tflm", "rows.0.bit_exact_with_host"} <= set(keys)
    if os.environ.get("AOT_WRITE_DOCS") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(shot, ROOT / "docs" / "report.png")


def _mobilenet_v2_48(tmp: Path) -> Path:
    """MobileNetV2 0.35 at 48x48 (aot.tools.zoo): `--ram-budget min` runs its first stage patch by
    patch, the default does not."""
    from aot.tools import zoo
    path = tmp / "mv2_48.tflite"
    path.write_bytes(zoo.build("mobilenet_v2", size=48, classes=10))
    return path


def _conv_net() -> Any:
    """Three int8 3x3 convolutions (16x16x3 -> 8x8x8 -> 8x8x8 -> 4x4x12) and a mean: `--ram-budget
    min` runs its first layers patch by patch (the patch cost tests' net)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "memory"))
    from test_patch_cost import _conv_net as conv_net
    return conv_net(False)


def test_patch_stage_spans_cover_the_patches() -> None:
    """The call steps shaded as the patch stage hold every buffer of the patches (the stage's
    tensors, suffixed _p<row>_<col>) and end before the last call; an unpatched build has none."""
    import re

    from aot.pipeline.driver import CompileOptions, compile_model
    from aot.tools.patch_view import describe, patch_records, stage_spans
    model = _conv_net()
    cm = compile_model(model, CompileOptions(ram_budget="min", policy="micro"))
    records = patch_records(cm.patch)
    assert records == cm.patch["stages"] and patch_records(records) == records
    spans = stage_spans(cm)
    assert len(spans) == len(records)
    first, end, label = spans[0]
    assert first == 0 < end < len(cm.plan.step_kernels)
    grid = f"{records[0]['grid'][0]}x{records[0]['grid'][1]}"
    assert f"{grid} patches up to {records[0]['cut']}" in label
    pieces = [b for b in cm.plan.buffers if re.search(r"_p\d+_\d+$", b.name)]
    assert pieces and all(b.last_use < end for b in pieces)
    assert describe(records[0]).startswith(f"{grid} over the stage from the input up to {records[0]['cut']} ")
    plain = compile_model(model, CompileOptions(ram_budget="off", policy="micro"))
    assert patch_records(plain.patch) == [] and stage_spans(plain) == []


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_report_of_a_patched_build(tmp_path: Path) -> None:
    """`aot report --ram-budget min`: the section shows the compiler's records of the build and the
    unpatched build (`--ram-budget off`) beside it; every figure on the page is the JSON's."""
    from aot.board.boards import load_board
    from aot.board.flow import board_options
    from aot.frontend import load
    from aot.pipeline.driver import compile_model
    from aot.tools.patch_view import patch_records, stage_spans
    model = _mobilenet_v2_48(tmp_path)
    rep, rep_json = tmp_path / "report.html", tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "aot", "report", str(model), "--board", "mps2-an386", "--ram-budget",
                        "min", "--no-profile", "--quiet", "-o", str(rep), "--json", str(rep_json)], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(rep_json.read_text())
    pt = data["patch"]
    assert data["ram_budget"] == "min" and pt is not None

    # the same builds, compiled here: the records, call steps and pools the report shows
    board = load_board("mps2-an386")
    options = {"opt": "speed", "source_bytes": model.stat().st_size}
    patched = compile_model(load(model), board_options(board, {**options, "ram_budget": "min"}))
    unpatched = compile_model(load(model), board_options(board, {**options, "ram_budget": "off"}))
    assert [{k: v for k, v in st.items() if k != "steps"} for st in pt["stages"]] == patch_records(patched.patch)
    assert [tuple(st["steps"]) for st in pt["stages"]] == [s[:2] for s in stage_spans(patched)]
    before, after = pt["unpatched"], pt["patched"]
    assert after["pool_bytes"] == data["summary"]["pool_bytes"] == patched.plan.activation_bytes
    assert before["pool_bytes"] == unpatched.plan.activation_bytes > after["pool_bytes"]
    assert before["lower_bound_bytes"] == unpatched.plan.lower_bound_bytes
    assert before["fits"] and before["bit_exact_with_host"] and after["bit_exact_with_host"]
    for k in ("ram_bytes", "instructions", "estimated_cycles"):
        assert after[k] == data["summary"][k] and before[k] > 0, k
    assert before["ram_bytes"] > after["ram_bytes"]
    assert pt["pool_ratio"] == round(after["pool_bytes"] / before["pool_bytes"], 4)
    assert pt["ram_ratio"] == round(after["ram_bytes"] / before["ram_bytes"], 4)
    assert pt["measured_instruction_overhead"] == round(after["instructions"] / before["instructions"] - 1, 4)
    assert pt["counted_instruction_overhead"] == round(sum(st["instruction_overhead"] for st in pt["stages"]), 4)
    assert pt["counted_overhead_source"] == patched.patch["overhead_source"]

    html = rep.read_text()
    st = pt["stages"][0]
    assert "<h2>Patch-based execution (--ram-budget min)</h2>" in html
    assert f"patch stage: {st['grid'][0]}x{st['grid'][1]} patches up to {st['cut']}" in html  # the plan's legend
    assert 'class="stage"' in html  # its shading
    keys = set(check_page(rep, data, tmp_path))
    assert {"patch.stages.0.cut", "patch.stages.0.halo_macs", "patch.stages.0.instruction_overhead",
            "patch.unpatched.pool_bytes", "patch.patched.pool_bytes", "patch.unpatched.ram_bytes",
            "patch.patched.ram_bytes", "patch.unpatched.instructions", "patch.patched.instructions",
            "patch.pool_ratio", "patch.counted_instruction_overhead",
            "patch.measured_instruction_overhead"} <= keys


def test_patch_section_when_the_unpatched_plan_does_not_fit() -> None:
    """An unpatched plan too large for the board: its pool (planned without a size) beside the
    patched build's figures, the reason in a note, no ratio it cannot have."""
    from aot.pipeline.driver import CompileOptions, compile_model
    from aot.tools.patch_view import patch_records, stage_spans
    from aot.tools.report import _patch_html
    model = _conv_net()
    cm = compile_model(model, CompileOptions(ram_budget="min", policy="micro"))
    plain = compile_model(model, CompileOptions(ram_budget="off", policy="micro"))
    stages = [{**r, "steps": list(s[:2])} for r, s in zip(patch_records(cm.patch), stage_spans(cm))]
    keys = ("pool_bytes", "ram_bytes", "instructions", "estimated_cycles", "lower_bound_bytes", "bit_exact_with_host")
    patched = {k: None for k in keys} | {"pool_bytes": cm.plan.activation_bytes, "bit_exact_with_host": True}
    unpatched = {k: None for k in keys} | {"pool_bytes": plain.plan.activation_bytes, "fits": False,
                                           "error": "model x does not fit board b"}
    pt = {"stages": stages, "patched": patched, "unpatched": unpatched,
          "pool_ratio": round(patched["pool_bytes"] / unpatched["pool_bytes"], 4), "ram_ratio": None,
          "estimated_cycles_ratio": None, "counted_instruction_overhead": stages[0]["instruction_overhead"],
          "counted_overhead_source": stages[0]["overhead_source"], "measured_instruction_overhead": None}
    data = {"patch": pt, "ram_budget": "min", "board": "b"}
    html = "\n".join(_patch_html(data))
    dom = Numbers()
    dom.feed(html)
    shown = {k: (v, text) for k, v, text in dom.nums}
    for key in ("patch.unpatched.pool_bytes", "patch.patched.pool_bytes", "patch.pool_ratio",
                "patch.stages.0.cut", "patch.counted_instruction_overhead"):
        value, text = shown[key]
        assert value == lookup(data, key) and text == (fmt_pct(value) if key in dom.pct else fmt(value)), key
    assert "patch.measured_instruction_overhead" not in shown and "patch.unpatched.instructions" not in shown
    assert "does not fit b's RAM" in html and "model x does not fit board b" in html

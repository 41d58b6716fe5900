"""`aot report` and `aot sweep --html` opened in headless Chromium (Debian's `chromium`, installed
by `make setup`): the page loads without a console error, its charts are non-empty (a script in
the page checks them), every number it shows equals the JSON written beside it, and a screenshot
is taken (AOT_WRITE_DOCS=1 writes it to docs/report.png for the README)."""
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

from aot.tools.report_svg import fmt  # noqa: E402
from conftest import shared_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

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
        self.nums: list[tuple[str, Any, str]] = []
        self._open: tuple[str, Any] | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = {k: v or "" for k, v in a.items()}
        if tag == "span" and "data-key" in a:
            self._open, self._text = (a["data-key"], json.loads(a["data-value"])), ""

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
        assert text == fmt(value), key
    if shot is not None:
        r = run_chromium(page, tmp / "profile-shot", "--hide-scrollbars", "--window-size=1100,2700",
                         f"--screenshot={shot}")
        assert r.returncode == 0, r.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    return [k for k, _, _ in dom.nums]


def test_console_errors_are_caught(tmp_path: Path) -> None:
    """The check itself: a page with a script error is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    r = run_chromium(bad, tmp_path / "p", "--dump-dom")
    assert console_errors(r.stderr), r.stderr[-2000:]


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
    shot = tmp_path / "report.png"
    keys = check_page(rep, data, tmp_path, shot)
    assert {"summary.instructions", "summary.flash_bytes", "summary.ram_bytes", "sweep.0.instructions",
            "layers.0.macs", "layers.0.instructions"} <= set(keys)
    keys = check_page(sw_html, sweep, tmp_path)
    assert {"rows.0.instructions", "rows.0.bit_exact_with_tflm", "rows.0.bit_exact_with_host"} <= set(keys)
    if os.environ.get("AOT_WRITE_DOCS") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(shot, ROOT / "docs" / "report.png")

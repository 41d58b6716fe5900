"""The guide runs as written: its runnable blocks execute on a small model, the site builds with
`mkdocs build --strict`, its home page loads in headless Chromium without a console error, the
generated pages hold what the code has, and the README stays a short front door into it."""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from blocks import Block, blocks, dangling_markers, pages  # noqa: E402
from conftest import SHARED, shared_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_gen"))
import docgen  # noqa: E402

BLOCK_TIMEOUT = 600


def _page_params(slow: bool) -> list:
    out = []
    for page in pages():
        bs = [b for b in blocks(page) if b.slow == slow]
        if bs:
            rel = page.relative_to(ROOT).as_posix()
            out.append(pytest.param(rel, id=rel, marks=[pytest.mark.slow] if slow else []))
    return out


def _workdir(tmp_path: Path) -> dict[str, str]:
    """A scratch directory with the models the guide names, and `aot` on PATH running this checkout."""
    shutil.copyfile(shared_model("kws_int8.tflite"), tmp_path / "model.tflite")
    person = SHARED / "tflm-models" / "models" / "person_detect.tflite"
    if person.is_file():
        shutil.copyfile(person, tmp_path / "person_detect.tflite")
    for name in ("kws_int8.tflite", "ad_int8.tflite", "micro_speech_quantized.tflite"):
        shutil.copyfile(shared_model(name), tmp_path / name)
    shutil.copyfile(shared_model("kws_int8.input.npy"), tmp_path / "x.npy")  # "your input", for model.tflite
    bin_dir = tmp_path / ".bin"
    bin_dir.mkdir()
    shim = bin_dir / "aot"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m aot "$@"\n')
    shim.chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
            "AOT_SHARED": str(SHARED)}


def _run(block: Block, cwd: Path, env: dict[str, str]) -> None:
    if block.lang == "sh":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        script = cwd / f".block_{block.line}.py"
        script.write_text(block.code)
        cmd = [sys.executable, str(script)]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
    assert r.returncode == 0, (f"{block.page}:{block.line}: the {block.lang} block failed (status {r.returncode})\n"
                               f"{block.code}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}")


def _run_page(rel: str, slow: bool, tmp_path: Path) -> None:
    env = _workdir(tmp_path)
    for b in blocks(ROOT / rel):
        if b.slow and not slow:
            continue
        _run(b, tmp_path, env)


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("page", _page_params(slow=False))
def test_runnable_blocks(page: str, tmp_path: Path) -> None:
    """Every block marked `<!-- runnable -->` runs, in the page's order, in one scratch directory."""
    _run_page(page, False, tmp_path)


@pytest.mark.usefixtures("arm_toolchain")
@pytest.mark.parametrize("page", _page_params(slow=True))
def test_runnable_slow_blocks(page: str, tmp_path: Path) -> None:
    """The page's blocks again, the slow ones included (they may need files the others made)."""
    _run_page(page, True, tmp_path)


def test_runnable_markers_mark_code_blocks() -> None:
    """A marker not directly followed by a sh or python fence would silently test nothing."""
    bad = {p.relative_to(ROOT).as_posix(): n for p in pages() if (n := dangling_markers(p))}
    assert bad == {}
    assert sum(len(blocks(p)) for p in pages()) >= 20


def test_block_extraction_finds_marked_blocks_only(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("<!-- runnable -->\n```sh\necho a\n```\n\n```sh\necho b\n```\n"
                    "<!-- runnable slow -->\n```python title=\"x\"\nprint(1)\n```\n<!-- runnable -->\ntext\n")
    import blocks as mod
    old = mod.ROOT
    mod.ROOT = tmp_path
    try:
        found = blocks(page)
        assert [(b.lang, b.code, b.slow) for b in found] == [("sh", "echo a\n", False), ("python", "print(1)\n", True)]
        assert dangling_markers(page) == [13]
    finally:
        mod.ROOT = old


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    assert "WARNING" not in r.stderr, r.stderr[-5000:]
    return out


def test_site_builds_strict(site: Path) -> None:
    for page in ("index.html", "getting-started.html", "reference/cli.html", "reference/operators.html",
                 "reference/errors.html", "reference/api.html", "troubleshooting.html"):
        assert (site / page).is_file(), page
    api = (site / "reference" / "api.html").read_text()
    assert "CompileOptions" in api and "GraphBuilder" in api and "ModelFormatError" in api
    for method in ("conv2d", "depthwise_conv2d", "fully_connected", "hard_swish", "concat"):  # every op method
        assert f"GraphBuilder.{method}" in api or f"id=\"aot.GraphBuilder.{method}\"" in api, method
    assert not (site / "_fragments").exists() and not (site / "_gen").exists()


def test_generated_cli_page_has_every_command_and_option(site: Path) -> None:
    import argparse
    from aot.cli.app import build_parser
    text = docgen.cli_md()
    for name, (_, sub) in docgen._subcommands(build_parser()).items():
        assert f"## aot {name}" in text
        for action in sub._actions:
            for opt in action.option_strings:
                if not isinstance(action, argparse._HelpAction):
                    assert f"`{opt}`" in text, (name, opt)
    assert "aot project" in (site / "reference" / "cli.html").read_text()


def test_generated_operator_page_lists_the_listing() -> None:
    listing = docgen._ops_listing()
    text = docgen.operators_md()
    rows = dict(re.findall(r"^\| ([A-Za-z0-9_.:]+|CUSTOM\([A-Za-z0-9_]+\)) \| ([a-z0-9, ]+) \|$", text, re.M))
    assert {k: v.split(", ") for k, v in rows.items()} == {**listing["onnx"], **listing["tflite"]}
    assert f"{len(listing['tflite'])} of the {docgen.TFLM_REGISTERED}" in text


def test_tflite_refusals_are_named_in_the_guide() -> None:
    """The TFLM registrations the listing lacks are named, with the reason, on the model page."""
    listing = docgen._ops_listing()["tflite"]
    model_page = (ROOT / "docs" / "model.md").read_text()
    for name in ("IF", "WHILE", "BasicClassifier", "ethos-u"):
        assert f"`{name}`" in model_page and name not in listing
    assert len(listing) >= 112


def test_every_error_raise_site_is_in_a_documented_group() -> None:
    sites = docgen.raise_sites()
    assert len(sites) > 300
    loose = sorted({s.path for s in sites if docgen.group_of(s.path) is None})
    assert loose == [], "add these files to a group of docs/_gen/docgen.py GROUPS"
    stale = [pre for g in docgen.GROUPS for pre in g.prefix if not (ROOT / pre).exists()]
    assert stale == [], "GROUPS name paths that no longer exist"
    text = docgen.errors_md()
    assert "`…: no such model file; give the path of a .tflite or .onnx file`" in text and "## Command-line arguments" in text


def test_error_messages_are_read_from_every_form() -> None:
    import ast
    form = {
        '"plain"': "plain", 'f"a {x} b"': "a … b", '"a " + f"{x}!"': "a …!", '"x %s" % y': "x …",
        "msg": "…", '"{} z".format(q)': "… z",
    }
    for src, want in form.items():
        assert docgen._text(ast.parse(src, mode="eval").body) == want, src


def test_readme_is_a_short_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 8
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert missing == []
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert page.name in nav, f"{page.name} is not in mkdocs.yml's nav"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_home_page_in_chromium(site: Path, tmp_path: Path) -> None:
    """The built home page, served over HTTP, loads in headless Chromium without a console error;
    its screenshot is the one in the guide (AOT_WRITE_DOCS=1 rewrites docs/img/home.png)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium missing: run `make setup` (Debian package chromium)")
    handler = functools.partial(_Quiet, directory=str(site))
    with socketserver.TCPServer(("127.0.0.1", 0), handler) as httpd:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
        shot = tmp_path / "home.png"
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
                            "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / 'profile'}",
                            "--window-size=1200,900", "--virtual-time-budget=3000", f"--screenshot={shot}", url],
                           capture_output=True, text=True, timeout=180)
        httpd.shutdown()
    errors = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln and any(
        w in ln for w in ("Uncaught", "Error", "error", "Failed to load"))]
    assert errors == [], r.stderr[-3000:]
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", r.stderr[-3000:]
    committed = ROOT / "docs" / "img" / "home.png"
    if os.environ.get("AOT_WRITE_DOCS") == "1":
        shutil.copyfile(shot, committed)
    assert committed.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "img/home.png" in (ROOT / "docs" / "design.md").read_text()

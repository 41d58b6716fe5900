"""MkDocs hook: adds the generated pages (docs/_gen/docgen.py) to the site at build time."""
from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import docgen  # noqa: E402


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocs' config object
    for rel in docgen.GENERATED:
        files.append(File.generated(config, rel, content=docgen.generate(rel)))
    return files

"""The `aot` command line (the console script is `aot.cli:main`).

- app.py: the parser, main() and its error contract (one line per error, exit 2; 3 for an
  internal error; 141 when the output pipe closes)
- common.py: argument helpers shared by the groups (model loading, --input, compile options)
- model.py: run, compile, plan, compare, ops
- board.py: boards, project, bench, footprint
- demo.py: demo
"""
from aot.cli.app import build_parser, main

__all__ = ["build_parser", "main"]

"""Board projects: generate a buildable firmware project from a model library and a board."""
from aot.board.project.generate import (
    DEFAULT_STACK_BYTES,
    ModelLibrary,
    TensorInfo,
    generate_project,
)
from aot.board.project.linker import Pool, place_pools, render_linker_script

__all__ = [
    "DEFAULT_STACK_BYTES",
    "ModelLibrary",
    "Pool",
    "TensorInfo",
    "generate_project",
    "place_pools",
    "render_linker_script",
]

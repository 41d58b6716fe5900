"""Graph passes: Model -> Model, none mutates its input."""
from .fold import fold_constants
from .fuse import fuse
from .inline import inline_functions
from .outputs import materialize_outputs
from .util import use_counts

__all__ = ["fold_constants", "fuse", "inline_functions", "materialize_outputs", "use_counts"]

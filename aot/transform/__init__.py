"""Graph passes: Model -> Model, none mutates its input."""
from aot.transform.fold import fold_constants
from aot.transform.fuse import fuse
from aot.transform.inline import inline_functions
from aot.transform.outputs import materialize_outputs
from aot.transform.pads import fold_pads
from aot.transform.tables import fold_tables
from aot.transform.util import use_counts

__all__ = ["fold_constants", "fold_pads", "fold_tables", "fuse", "inline_functions", "materialize_outputs", "use_counts"]

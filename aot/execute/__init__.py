"""Running many independent tasks (sweep cells, tuning trials): a local process pool sized to
the machine by default, or a Ray cluster with `--ray ADDRESS|auto`.

- task.py: Task (a function named by "module:function" and its keyword arguments, plain data
  that pickles: model bytes and options travel in it) and call_task, which runs one
- pool.py: run_tasks (local pool or Ray, results in task order, identical either way; Ray
  retries a task whose worker died)
- progress.py: a progress bar on a terminal, plain lines otherwise
- cells.py: the task functions of `aot sweep` and `aot tune` (one board build + QEMU run each)

Ray is an optional extra (`pip install "microaot[ray]"`): nothing here imports it until a
--ray run asks for it.
"""
from aot.execute.pool import default_jobs, run_tasks
from aot.execute.progress import Progress
from aot.execute.task import Task, call_task

__all__ = ["Task", "call_task", "run_tasks", "default_jobs", "Progress"]

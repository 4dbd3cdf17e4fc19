"""Scale-out: a stage's work cut into units by a deterministic plan (the manifest), run on an
executor (local worker processes, Ray tasks, Slurm job arrays), and finalized into an output
byte-identical to one run on one machine. The stages are reached by name through
``data_io.stage`` (this package imports none). Manual: docs/stages/scale.md.

* ``manifest``: the saved plan and its unit records; ``plan``: a stage's plan as a manifest;
* ``units``: one unit run, recorded; ``finalize``: the stage's finalize, then ``finalized.json``;
* ``run``: plan, execute, finalize, ``resume``; ``local`` / ``ray_executor`` / ``slurm``: the
  executors; ``processes``: signals and child processes; ``leftovers``: dead runs' temporaries;
* ``status`` / ``progress``: where a run stands; ``cli``: ``--executor``, ``status``,
  ``resume``, ``scale unit|finalize``.
"""

from data_io.scale.manifest import Manifest, Unit
from data_io.scale.plan import plan_tokenize
from data_io.scale.run import ExecutorSettings, Outcome, resume, scale_tokenize

__all__ = [
    "ExecutorSettings",
    "Manifest",
    "Outcome",
    "Unit",
    "plan_tokenize",
    "resume",
    "scale_tokenize",
]

"""Scale-out: a stage's work cut into units by a deterministic plan (the manifest), run on an
executor (local worker processes, Ray tasks, Slurm job arrays), and finalized into an output
byte-identical to one run on one machine. See README "Scale out"."""

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

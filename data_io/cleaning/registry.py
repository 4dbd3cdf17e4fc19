"""The 25 cleaners of the pipeline, under the original's module names.

Each module defines ``CLEANER`` (a :class:`~data_io.cleaning.runner.Cleaner`). A cleaner's name
is its module's last component without ``clean_`` (``pipe.clean_gsm8k_train`` -> ``gsm8k_train``).
Modules not written yet are listed as such, so adding a cleaner means adding its module only.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from data_io.cleaning.runner import Cleaner
from data_io.errors import ConfigError

# In cleaners.md §3.0 order.
CLEANER_MODULES: tuple[str, ...] = (
    "pipe.clean_amps_khan",
    "pipe.clean_gsm8k_train",
    "pipe.clean_math_train",
    "pipe.clean_natural_reasoning",
    "pipe.clean_no_robots",
    "pipe.clean_numinamath",
    "pipe.clean_omnimath",
    "pipe.clean_principia_collection",
    "pipe.clean_webinstruct_verified",
    "pipe.clean_platypus.clean_arb",
    "pipe.clean_platypus.clean_openbookqa",
    "pipe.clean_platypus.clean_reclor",
    "pipe.clean_platypus.clean_scibench",
    "pipe.clean_platypus.clean_scienceqa",
    "pipe.clean_platypus.clean_theoremqa",
    "pipe_clustered.clean_SYNTH",
    "pipe_clustered.clean_acereason",
    "pipe_clustered.clean_ampsmathematica",
    "pipe_clustered.clean_dmmath",
    "pipe_clustered.clean_flan",
    "pipe_clustered.clean_openmathinstruct2",
    "pipe_clustered.clean_openthoughts2",
    "pipe_clustered.clean_sudoku",
    "pipe_clustered.clean_tasksource",
    "pipe_clustered.clean_textbookreasoning",
)


@dataclass(frozen=True)
class Entry:
    """A registered cleaner; ``cleaner`` is ``None`` while its module is not written yet."""

    name: str
    module: str
    cleaner: Cleaner | None


def name_of(module: str) -> str:
    return module.rsplit(".", 1)[-1].removeprefix("clean_")


def _load(module: str) -> Cleaner | None:
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            return None  # not written yet
        raise
    cleaner = getattr(loaded, "CLEANER", None)
    if not isinstance(cleaner, Cleaner):
        raise ConfigError(f"{module} defines no CLEANER (a data_io.cleaning.Cleaner)")
    return cleaner


def entries() -> list[Entry]:
    """Every registered cleaner, in cleaners.md order."""
    return [Entry(name_of(module), module, _load(module)) for module in CLEANER_MODULES]


def find(name: str) -> Entry:
    """The entry called ``name`` (a cleaner name or module path, case-insensitive)."""
    wanted = name.lower()
    for module in CLEANER_MODULES:
        if wanted in (name_of(module).lower(), module.lower()):
            return Entry(name_of(module), module, _load(module))
    known = ", ".join(name_of(module) for module in CLEANER_MODULES)
    raise ConfigError(f"no cleaner called {name!r}; known cleaners: {known}")

"""The load stage: torch datasets and loaders over what the earlier stages wrote.

* ``SampledDataset`` over a sampled folder (formats.md §4/§5, the HRM-Text trainer's batches),
  with ``ResumableDataLoader`` for exact resume.
* Flat token shards (formats.md §6): ``MemoryMappedDataset``; several of them mixed by weight,
  temperature and phases: ``MixtureDataset`` + ``MixtureSampler``; ``DistributedSampler``.
* HF text sources tokenized by the Rust encoder: ``HuggingFaceDataset`` (eager, cached as shards)
  and ``StreamingHuggingFaceDataset`` (sharded over ranks and workers).
* xorl's tokenized rows with sequential/multipack packing: ``TokenizedRowsDataset``.
* One typed config (``LoaderConfig``: ``DataConfig``, ``DatasetSource``, ``TrainingPhase``,
  ``EvalConfig``) and one entry point, ``build_dataloader(config, rank, world_size)``, whose
  ``StatefulLoader`` resumes exactly, and elastically across world sizes and worker counts;
  ``build_eval_loader`` for ``[eval]`` (``build_eval_loaders``: with its named sets).

torch is imported only inside this package, and only when one of these names is first used
(the command line imports ``data_io.load.cli`` without paying for torch).

The package in floors, each importing only the floors below it (``make lint`` checks it)::

    cli -> check -> eval, export_rows -> build -> config
        -> datasets/ (one Dataset family per module), dataloader/stateful.py
        -> dataloader/collate.py -> order/ (index orders), packing/ (numpy only)
        -> dataset_state.py, stream_state.py -> protocols.py

``build.py`` is the one module that names every dataset family; below it, a dataset is known
by what it can do (``protocols.py``). The on-disk readers (sampled folders, shard metadata) are in
``data_io.formats``.
"""

from __future__ import annotations

from data_io.util.lazy import lazy_exports

# Public name -> the module that defines it.
_EXPORTS = {
    "IGNORE_INDEX": "packing.layouts",
    "SCALAR_KEYS": "packing.layouts",
    "ResumableDataLoader": "datasets.sampled",
    "SampledDataset": "datasets.sampled",
    "format_batch": "datasets.sampled",
    "split_scalars": "datasets.sampled",
    "MemoryMappedDataset": "datasets.shards",
    "DistributedSampler": "order.samplers",
    "MixtureSampler": "order.samplers",
    "MixtureDataset": "datasets.mixture",
    "StatefulLoader": "dataloader.stateful",
    "collate_samples": "dataloader.collate",
    "DataConfig": "config",
    "DatasetSource": "config",
    "EvalConfig": "config",
    "LoaderConfig": "config",
    "TrainSection": "config",
    "TrainingPhase": "config",
    "load_config": "config",
    "build_dataloader": "build",
    "EvalLoader": "eval",
    "build_eval_loader": "eval",
    "build_eval_loaders": "eval",
    "HuggingFaceDataset": "datasets.hf_text",
    "StreamingHuggingFaceDataset": "datasets.hf_text",
    "RowSource": "datasets.row_sources",
    "TokenizedRowsDataset": "datasets.tokenized_rows",
    "rows_dataset_from_config": "build",
    "export_sampled_rows": "export_rows",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

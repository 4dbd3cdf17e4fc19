"""Shared ground that knows no stage: every module here imports only the standard library, its
third-party packages and ``data_io.errors``.

* ``args``: the rows-and-output arguments the row-reading commands share;
* ``closed_stdout``: ending quietly when the reader of stdout goes away (``| head``);
* ``console``: the rich console of the summaries, progress on a terminal, quiet Hub libraries;
* ``fs``: temporary outputs published atomically, file hashes;
* ``hub``: Hugging Face Hub access (offline detection, one error for "not reachable");
* ``json_kinds``: a JSON value's kind in JSON's words, for messages about rows and plans;
* ``lazy``: package faces that import their modules on first use;
* ``stale``: temporary files and folders left by dead processes.
"""

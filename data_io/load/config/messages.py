"""Config errors that say where: OmegaConf's message with the key's full path, and a check's
message prefixed with the file it read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from omegaconf.errors import OmegaConfBaseException

from data_io.errors import ConfigError, InputError


def omegaconf_error(
    where: str, err: OmegaConfBaseException, place: str = "", kind: type | None = None
) -> ConfigError:
    """OmegaConf's message with the key's full path: ``place`` is where the checked table sits
    (``data.datasets[1]``), ``kind`` its dataclass, whose field's type says what the key takes."""
    message = str(err).splitlines()[0]
    key = getattr(err, "full_key", None) or ""
    full = f"{place}.{key}" if place and key else place or key
    takes = ""
    if kind is not None and key:
        annotation = getattr(kind.__dataclass_fields__.get(key.split(".")[0]), "type", None)
        if isinstance(annotation, str):  # `from __future__ import annotations`: the text
            takes = f"; {full} takes {annotation}"
    return ConfigError(f"{where}: {message}" + (f" (key {full})" if full else "") + takes)


@contextmanager
def in_file(where: str) -> Iterator[None]:
    """Prefix a check's message with the file it read (``job.toml: train.batch_size must be
    >= 1``): the checks name the key, and a job may have several config files."""
    try:
        yield
    except ConfigError as err:
        message = str(err)
        if message.startswith(f"{where}:"):
            raise
        raise ConfigError(f"{where}: {message}") from err


@contextmanager
def from_job_file(config: object) -> Iterator[None]:
    """Prefix what building from the job file ``config`` names raises with the file
    (``job.toml: /data/shards: no files match '*.bin'; ...``): the datasets' checks name the
    folder and key, not the file that set them. A config given as an object or a dict names
    no file: nothing is added."""
    if not isinstance(config, (str, os.PathLike)):
        yield
        return
    where = str(config)
    try:
        yield
    except (ConfigError, InputError) as err:
        if str(err).startswith(f"{where}:"):
            raise
        raise type(err)(f"{where}: {err}") from err

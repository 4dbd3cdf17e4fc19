"""Stratified sampling on a training node (the original's entry point, same options).

    python sample_tokenized.py epochs=10 > show_analytics.md

Same as ``data_io sample ...``; see ``data_io/sampling`` and docs/stages/sample.md.
"""

import sys

from data_io.sampling import main
from data_io.util.closed_stdout import exit_quietly_on_closed_stdout

if __name__ == "__main__":
    sys.exit(exit_quietly_on_closed_stdout(main))

import sys

from data_io.cli import main

sys.exit(main())

"""``python -m adaptmc ...``: the command line (`adaptmc.cli.main`)."""

import sys

from adaptmc.cli import main

sys.exit(main())

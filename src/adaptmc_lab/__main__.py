import sys

from adaptmc_lab.cli import main

sys.exit(main())

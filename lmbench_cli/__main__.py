"""`python -m lmbench_cli ...`: the `lmbench` command without the installed script."""

import sys

from lmbench_cli import main

sys.exit(main())

"""`python -m lab.demo` (what `make demo` runs, from the repository root): lab/demo/main.py."""

import sys

from lab.demo.main import main

sys.exit(main())

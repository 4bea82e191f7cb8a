"""`python -m experiments.report RUN_DIR_OR_GLOB ... [--out DIR]`: figures, statistics and report.md from runs' logs."""

import sys

from stoix_like.report.command import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m fkv_jit ARGS` runs the fkv-jit CLI (fkv_jit._cli)."""

import sys

from ._cli import main

sys.exit(main())

"""`python -m gpuharness`."""

from gpuharness.cli import main

raise SystemExit(main())

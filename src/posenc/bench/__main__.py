"""`python -m posenc.bench` (the bias section's workers run this way too)."""

from posenc.bench.cli import main

raise SystemExit(main())

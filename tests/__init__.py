"""xfid test suite."""

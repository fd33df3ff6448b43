"""`python -m xfid`."""

from xfid.cli import main

main()

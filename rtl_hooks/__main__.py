"""`python -m rtl_hooks run|inspect ...`: the same commands as `xfid rtl run|inspect`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run `xfid rtl ARGS` (global options such as --store go after `python -m rtl_hooks`)."""
    from xfid.cli import main as xfid_main

    args = list(sys.argv[1:] if argv is None else argv)
    globals_ = []
    while args and args[0].startswith("--") and args[0] in ("--store", "--config"):
        globals_ += args[:2]
        args = args[2:]
    xfid_main([*globals_, "rtl", *args])


if __name__ == "__main__":
    main()

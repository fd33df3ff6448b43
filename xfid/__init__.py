"""xfid: multi-fidelity correlation and discrepancy tracker."""

__version__ = "0.1.0"

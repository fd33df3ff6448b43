"""The weekly discrepancy report: ReportData, plots, HTML/PDF rendering."""

from __future__ import annotations

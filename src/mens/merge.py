"""Moved to `mens.export.merge`; this name stays only until `mens.serve` imports from there."""

from mens.export.merge import CHATML_TEMPLATE, MergeReport, format_report, merge_run, report_json  # noqa: F401

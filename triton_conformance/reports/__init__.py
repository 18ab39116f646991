"""Reports rendered from the results JSON: the terminal matrix, the HTML page, the nightly diff, Allure.

Importing the package registers the built-in report formats (html, text: :mod:`.formats`).
"""

from triton_conformance.reports.diff import ResultsDiff, diff_documents
from triton_conformance.reports.formats import ReportFormat, register_format, report_format, write_report
from triton_conformance.reports.html import render_html, write_html
from triton_conformance.reports.terminal import document_lines
from triton_conformance.reports.results_json import read_results, results_document, write_results

__all__ = ["ReportFormat", "ResultsDiff", "diff_documents", "document_lines", "read_results", "register_format",
           "render_html", "report_format", "results_document", "write_html", "write_report", "write_results"]

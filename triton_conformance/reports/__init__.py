"""Reports rendered from the results JSON: the terminal matrix, the HTML page, the nightly diff, Allure."""

from triton_conformance.reports.diff import ResultsDiff, diff_documents
from triton_conformance.reports.html import render_html, write_html
from triton_conformance.reports.results_json import read_results, results_document, write_results

__all__ = ["ResultsDiff", "diff_documents", "read_results", "render_html", "results_document", "write_html",
           "write_results"]

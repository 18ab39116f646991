"""The HTML report in a real headless browser: Debian's chromium, driven by selenium.

The page is rendered from a real interpreter run (softmax and
softmax_block1024) plus one hostile subject name.  The screenshots are kept
under the test's tmp dir; their paths are printed (``pytest -s`` shows them).
With ``REPORT_SCREENSHOT=path.png`` the one with a cell's detail open is also
written there (docs/report-screenshot.png was made so).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from triton_conformance.reports.html import write_html

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SNAPSHOT = Path(__file__).parent / "data" / "softmax-interpreter.json"
EVIL = "<script>alert(1)</script>"
EVIL_MESSAGE = '<img src=x onerror="window.__pwned = 1">'

if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; "
                ".ci/run installs them)", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium manager must not download a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1500,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    doc = json.loads(SNAPSHOT.read_text())
    evil = copy.deepcopy(next(r for r in doc["results"] if r["outcome"] == "wrong"))
    evil.update(subject=EVIL, family=EVIL, message=EVIL_MESSAGE, expected_failure=None)
    doc["results"].append(evil)
    path = write_html(str(tmp_path_factory.mktemp("report") / "report.html"), doc)
    return Path(path).as_uri(), doc


def visible(driver, css):
    return [e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]


def test_matrix_detail_reproducer_and_screenshot(browser, page, tmp_path):
    url, doc = page
    browser.get(url)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.matrix tr.subject")
    assert [r.get_attribute("data-subject") for r in rows] == [EVIL, "softmax", "softmax_block1024"]
    cells = sorted({r["cell"] for r in doc["results"]})
    for row in rows:
        assert len(row.find_elements(By.CSS_SELECTOR, "td.cell")) == len(cells) == 24
    assert len(browser.find_elements(By.CSS_SELECTOR, "td.cell[data-outcome]")) == len(doc["results"])
    assert browser.find_element(By.ID, "visible-rows").text == "3"

    # Hostile text stays text: no script ran, no alert, the name reads as written.
    assert rows[0].find_element(By.CSS_SELECTOR, "th.subject").text.startswith(EVIL)
    assert browser.execute_script("return window.__pwned") is None
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018

    # Open a failing cell of the buggy softmax and find its reproducer.
    assert not visible(browser, "#panel")
    cell = browser.find_element(By.CSS_SELECTOR,
                                'tr[data-subject="softmax_block1024"] td.cell[data-outcome="wrong"] a')
    cell.click()
    detail = WebDriverWait(browser, 5).until(lambda d: visible(d, "section.detail"))[0]
    assert detail.find_element(By.TAG_NAME, "h2").text == "softmax_block1024[layout:contiguous]"
    repro = detail.find_element(By.CSS_SELECTOR, "pre.reproducer")
    assert repro.is_displayed()
    assert ("replay('kernels_under_test.softmax', 'softmax_block1024', 'layout:contiguous', example, device='cpu')"
            in repro.text)
    assert "'N': 1025" in repro.text
    detail.find_element(By.CSS_SELECTOR, "button.copy").click()
    WebDriverWait(browser, 5).until(lambda d: detail.find_element(By.CSS_SELECTOR, ".copied").text == "copied")
    shot = tmp_path / "report-detail.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    if os.environ.get("REPORT_SCREENSHOT"):  # summary, failing cells and matrix, with the detail open beside them
        browser.execute_script("window.scrollTo(0, document.querySelector('.summary-section').offsetTop);"
                               "document.getElementById('panel').scrollTop = 0;")
        assert browser.save_screenshot(os.environ["REPORT_SCREENSHOT"])

    # Escape closes the detail; the filters hide rows.
    browser.find_element(By.TAG_NAME, "body").send_keys("\ue00c")
    WebDriverWait(browser, 5).until(lambda d: not visible(d, "#panel"))
    browser.find_element(By.ID, "subject-filter").send_keys("block")
    assert [r.get_attribute("data-subject") for r in visible(browser, "tr.subject")] == ["softmax_block1024"]
    browser.find_element(By.ID, "show-all").click()
    browser.find_element(By.ID, "failing-only").click()
    assert [r.get_attribute("data-subject") for r in visible(browser, "tr.subject")] == [EVIL, "softmax_block1024"]
    faded = browser.find_elements(By.CSS_SELECTOR, 'tr[data-subject="softmax_block1024"] td.faded')
    assert {td.get_attribute("data-outcome") for td in faded} == {"honoured", "rejected", "skipped"}
    shot = tmp_path / "report-failing-only.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")


def test_the_page_explains_itself(browser, page):
    url, doc = page
    browser.get(url)
    height = browser.execute_script("return window.innerHeight")

    # The failing cells are listed on the first screen, the new bug (the hostile copy) before the known ones.
    failing = browser.find_element(By.ID, "failing")
    items = failing.find_elements(By.CSS_SELECTOR, "li")
    links = failing.find_elements(By.CSS_SELECTOR, "li a")
    assert len(links) == sum(r["outcome"] in ("wrong", "unsafe", "crash") for r in doc["results"]) == 17
    assert failing.location["y"] < height and items[-1].is_displayed()
    assert items[0].text.startswith(f"{EVIL}[determinism] wrong outputs differ from the oracle at 1 of 1025 elements")
    assert items[1].text.startswith("softmax_block1024 known bug 16 failing cells, as expected")
    # ... and the matrix starts on the first screen too.
    matrix = browser.find_element(By.CSS_SELECTOR, "table.matrix")
    assert matrix.location["y"] < height

    # Skip reasons: counted by kind in the summary, and on hover over a skipped cell.
    skips = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.skips li")]
    # (bf16 runs on the interpreter now, through the compat layer: no "not testable here")
    assert len(skips) == 2, skips
    assert skips[0].startswith("2 skipped (large-index:contract-below-2^31), e.g.: contract admits at most "), skips
    assert skips[1].startswith("2 skipped (values:not-claimed), e.g.: value class '"), skips
    skipped = browser.find_element(By.CSS_SELECTOR, 'tr[data-subject="softmax"] td[data-cell="values:denormal"] a')
    assert skipped.get_attribute("title") == "softmax[values:denormal]: skipped: value class 'denormal' not claimed"

    # Column headers explain their cell; the legend lists letters, the hatched mark and the cells.
    size1 = browser.find_element(By.CSS_SELECTOR, 'thead th[data-cell="layout:size1"]')
    assert size1.get_attribute("title").startswith("layout:size1: ") and "size-1" in size1.get_attribute("title")
    browser.find_element(By.CSS_SELECTOR, 'a[href="#legend"]').click()
    legend = browser.find_element(By.ID, "legend")
    WebDriverWait(browser, 5).until(lambda d: legend.location["y"] - d.execute_script("return window.scrollY")
                                    < height)
    letters = {tr.get_attribute("data-outcome"): tr.find_element(By.CSS_SELECTOR, ".legend-cell").text
               for tr in legend.find_elements(By.CSS_SELECTOR, "tr[data-outcome]")}
    assert letters == {"honoured": "H", "rejected": "R", "wrong": "W", "unsafe": "U", "crash": "C",
                       "compile-error": "K", "timeout": "T", "skipped": ".", "oracle-error": "E", "harness-error": "!",
                       "accepted": "A"}
    assert "not applicable" in legend.find_element(By.CSS_SELECTOR, 'tr[data-mark="none"]').text
    large = legend.find_element(By.CSS_SELECTOR, 'div[data-cell="shape:large-index"]')
    assert "2^31" in large.text and large.is_displayed()

    # A wrong answer in the memory column says it is one, and is not read as a memory bug.
    memory = browser.find_element(By.CSS_SELECTOR, 'tr[data-subject="softmax_block1024"] td[data-cell="memory"]')
    assert "incidental" in memory.get_attribute("class") and memory.text == "W"
    assert "not a memory-safety finding" in memory.find_element(By.TAG_NAME, "a").get_attribute("title")

    # The failing list opens a cell's detail: its plot marks where the failures start.
    browser.execute_script("window.scrollTo(0, 0)")
    next(a for a in browser.find_elements(By.CSS_SELECTOR, "#failing li a") if a.text == "layout:contiguous").click()
    detail = WebDriverWait(browser, 5).until(lambda d: visible(d, "section.detail"))[0]
    assert detail.find_element(By.TAG_NAME, "h2").text == "softmax_block1024[layout:contiguous]"
    boundary = detail.find_element(By.CSS_SELECTOR, "svg.plot line.boundary")
    assert (boundary.get_attribute("data-last-pass"), boundary.get_attribute("data-first-fail")) == ("1024", "1025")
    strides = detail.find_element(By.CSS_SELECTOR, "table.tensors td.strides").text
    assert strides == "(1025, 1)"

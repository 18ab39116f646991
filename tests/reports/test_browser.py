"""The HTML report in a real headless browser: Debian's chromium, driven by selenium.

The page is rendered from a real interpreter run (softmax and
softmax_block1024) plus one hostile subject name.  The screenshot is kept
under the test's tmp dir; its path is printed (``pytest -s`` shows it).
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
        assert len(row.find_elements(By.CSS_SELECTOR, "td.cell")) == len(cells) == 23
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
    assert "replay('kernels_under_test.softmax', 'softmax_block1024', spec, device='cpu')" in repro.text
    assert "'N': 1025" in repro.text
    detail.find_element(By.CSS_SELECTOR, "button.copy").click()
    WebDriverWait(browser, 5).until(lambda d: detail.find_element(By.CSS_SELECTOR, ".copied").text == "copied")
    shot = tmp_path / "report-detail.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")

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

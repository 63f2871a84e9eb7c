"""``kvcontract report`` in a real headless browser (Debian's chromium through its chromedriver,
installed by scripts/install-browser.sh, which scripts/setup.sh runs): the page renders from a
file:// URL with nothing fetched, every section is there and shown, every link lands on its
target, each corpus table has its drawing, and a drawing whose plans differ shows the mark in
red pixels. Skips, naming the script, where no browser is installed.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from kvcontract import cli
from kvcontract.conformance.reports.html.drawing import DIFF
from kvcontract.conformance.reports.html.render import SECTIONS

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "report" / "check-mutant.json"
pytestmark = pytest.mark.slow


def _screenshot_script() -> Any:
    spec = importlib.util.spec_from_file_location("report_screenshot", ROOT / "scripts" / "report_screenshot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    shots = _screenshot_script()
    found = shots.browser_paths()
    if isinstance(found, str):
        pytest.skip(f"no headless browser: {found}")
    folder = tmp_path_factory.mktemp("browser")
    page = folder / "report.html"
    assert cli.main(["report", str(FIXTURE), "--out", str(page), "--engine", "mutant:hybrid-flag-ignored",
                     "--no-history"]) == 0
    driver = shots.open_browser(1280, 900)
    try:
        driver.get(page.as_uri())
        yield driver
    finally:
        driver.quit()


def test_the_page_renders_with_every_section_and_nothing_fetched(browser: Any) -> None:
    assert browser.execute_script("return document.readyState") == "complete"
    assert "mutant:hybrid-flag-ignored" in browser.title
    for section in SECTIONS:
        box = browser.execute_script(
            "const e = document.getElementById(arguments[0]); if (!e) return null; "
            "const r = e.getBoundingClientRect(); return [r.width, r.height]", section)
        assert box is not None and box[0] > 0 and box[1] > 0, section
    # a file:// page that loads nothing: no resource entries, no script
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert browser.execute_script("return document.scripts.length") == 0


def test_every_link_lands_on_its_target(browser: Any) -> None:
    hrefs = browser.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    assert hrefs and all(h.startswith("#") for h in hrefs)
    missing = browser.execute_script(
        "return arguments[0].filter(h => !document.getElementById(decodeURIComponent(h.slice(1))))", hrefs)
    assert missing == []
    # following a defect's link scrolls its section into view
    first = browser.execute_script("return document.querySelector('table.defects a').getAttribute('href')")
    browser.execute_script("window.scrollTo(0, 0)")
    browser.find_element("css selector", f"table.defects a[href='{first}']").click()
    assert browser.execute_script("return location.hash") == first
    top = browser.execute_script(
        "return document.getElementById(arguments[0]).getBoundingClientRect().top", first[1:])
    assert -2 <= top < browser.execute_script("return window.innerHeight")


def test_a_drawing_per_corpus_table_and_the_differences_in_red(browser: Any) -> None:
    tables = browser.execute_script("return document.querySelectorAll('details.plan').length")
    assert tables >= 1
    without = browser.execute_script(
        "return [...document.querySelectorAll('details.plan')].filter(d => !d.querySelector('svg.plan-drawing'))"
        ".map(d => d.id)")
    assert without == []
    # every corpus table the check fed is drawn, or listed under the drawing that stands for it
    fed = json.loads(FIXTURE.read_text())["tables"]
    unnamed = browser.execute_script(
        "const text = [...document.querySelectorAll('details.plan')].map(d => d.textContent).join(' '); "
        "return arguments[0].filter(t => !text.includes(t))", fed)
    assert unnamed == []
    differing = browser.find_elements("css selector", "svg.plan-drawing[data-differs='true']")
    assert differing, "the mutant's hybrid-off plans differ from the reference's"
    target = differing[0]
    assert browser.execute_script("return arguments[0].closest('details').open", target)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", target)
    size = target.size
    assert size["width"] > 300 and size["height"] > 50
    marked = _red_pixels(target.screenshot_as_png)
    assert marked > 50, f"{marked} pixels of the difference colour in the drawing"
    calm = browser.find_elements("css selector", "svg.plan-drawing[data-differs='false']")
    if calm:
        browser.execute_script("const d = arguments[0].closest('details'); d.open = true; "
                               "arguments[0].scrollIntoView({block: 'center'})", calm[0])
        assert _red_pixels(calm[0].screenshot_as_png) == 0


def _red_pixels(png: bytes) -> int:
    """Pixels of the difference colour (within a little antialiasing) in a screenshot."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    red = np.array([int(DIFF[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(pixels - red).max(axis=-1) <= 24).sum())

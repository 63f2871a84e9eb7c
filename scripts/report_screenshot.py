"""Regenerate docs/report-screenshot.png: a `kvcontract report` page opened in headless Chromium
(Debian's chromium and chromedriver, scripts/install-browser.sh; selenium from the dev extra),
three views stitched into one image — the header and clause table, the first defect's section
with its engine line, and the first corpus table whose plans differ.

    python scripts/report_screenshot.py                        # check vllm (quick profile), report, shoot
    python scripts/report_screenshot.py --check r.json [--plans p.json | --engine vllm]

The browser helpers here (:func:`browser_paths`, :func:`open_browser`) are also the browser
test's (tests/test_report_browser.py).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "report-screenshot.png"
WIDTH = 1280
VIEW = 1000
"""The height of each view stitched."""


def browser_paths() -> tuple[str, str] | str:
    """``(chromium, chromedriver)``, or why they cannot be used here."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        return "no chromium and chromedriver here (bash scripts/install-browser.sh installs Debian's)"
    return chromium, driver


def open_browser(width: int = WIDTH, height: int = VIEW) -> Any:
    """A headless Chromium driven through its chromedriver (never a downloaded one)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = browser_paths()
    if isinstance(found, str):
        raise RuntimeError(found)
    chromium, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--hide-scrollbars", f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def _view(browser: Any, selector: str | None) -> Any:
    from PIL import Image

    if selector is None:
        browser.execute_script("window.scrollTo(0, 0)")
    else:
        browser.execute_script("const e = document.querySelector(arguments[0]); if (e.tagName === 'DETAILS') "
                               "e.open = true; e.scrollIntoView({block: 'start'}); window.scrollBy(0, -40)", selector)
    return Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")


def shoot(page: Path, out: Path) -> None:
    from PIL import Image

    browser = open_browser()
    try:
        browser.get(page.resolve().as_uri())
        views = [_view(browser, None), _view(browser, "article.defect"),
                 _view(browser, "details.plan.differs") if browser.find_elements("css selector", "details.plan.differs")
                 else _view(browser, "details.plan")]
    finally:
        browser.quit()
    gap = 6
    sheet = Image.new("RGB", (WIDTH, sum(v.height for v in views) + gap * (len(views) - 1)), "#90a4ae")
    y = 0
    for view in views:
        sheet.paste(view, (0, y))
        y += view.height + gap
    sheet = sheet.resize((WIDTH * 3 // 4, sheet.height * 3 // 4), Image.LANCZOS)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, optimize=True)  # a third of the bytes


def _kvcontract(*words: str) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_LOGGING_LEVEL": "ERROR"}
    done = subprocess.run([sys.executable, "-m", "kvcontract", *words], env=env, check=False)
    if done.returncode not in (0, 1):  # check exits 1 when something failed: still a report
        raise SystemExit(f"kvcontract {words[0]} failed (exit {done.returncode})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", help="a check report (default: check --engine ENGINE --profile quick now)")
    parser.add_argument("--engine", default="vllm", help="the engine checked and planned (default vllm)")
    parser.add_argument("--plans", help="kept plans (kvcontract report --save-plans) instead of planning")
    parser.add_argument("--out", default=str(OUT), help=f"the image (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    found = browser_paths()
    if isinstance(found, str):
        raise SystemExit(f"report_screenshot: {found}")
    with tempfile.TemporaryDirectory(prefix="kvcontract-shot-") as scratch:
        check = args.check or str(Path(scratch) / "check.json")
        if not args.check:
            _kvcontract("check", "--engine", args.engine, "--profile", "quick", "--no-xfails", "--quiet",
                        "--json", check, "--repro-dir", str(Path(scratch) / "repros"))
        page = Path(scratch) / "report.html"
        source = ["--plans", args.plans] if args.plans else ["--engine", args.engine]
        _kvcontract("report", check, "--out", str(page), *source)
        shoot(page, Path(args.out))
    print(f"report_screenshot: wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

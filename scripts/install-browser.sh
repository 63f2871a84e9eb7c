#!/usr/bin/env bash
# Install the headless browser that the report's browser test drives (tests/test_report_browser.py)
# and scripts/report_screenshot.py uses: Debian's chromium and its matching chromedriver, by
# package name. The Python side (selenium) comes with the `report` extra of pyproject.toml.
#
# Idempotent: nothing happens when both are there already. Where this is not a root shell on a
# Debian-like system (no apt-get), it says so and exits 0: the browser test then skips, naming
# this script.
set -euo pipefail

say() { echo "install-browser: $*"; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get here: install chromium and chromedriver yourself for the report's browser test"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  say "not root: run 'sudo bash scripts/install-browser.sh' for the report's browser test"
  exit 0
fi
say "installing chromium and chromium-driver (Debian packages) ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
say "$(chromium --version 2>/dev/null || echo 'chromium installed')"

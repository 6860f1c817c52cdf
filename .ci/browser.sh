#!/usr/bin/env bash
# Chromium for tests/render/test_html_browser.py (the HTML report as a browser renders it): Debian's
# own package, driven over the DevTools pipe, so no driver and no browser download.
# About a minute on a fresh machine (the install alone took 67 s here, with recommends);
# nothing when it is already installed. The browser test itself takes about 10 s.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium fonts-liberation  # fonts: readable screenshots

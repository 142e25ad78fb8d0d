#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine: the Debian packages with
# Fashion-MNIST and a headless Chromium with its driver (where apt is available and we are
# root; the report's browser test skips without them), the torch 2.13.0 CPU build, and the
# project with its pinned dependencies (constraints.txt; Ray for sweeps, selenium for tests).
set -euo pipefail
cd "$(dirname "$0")"
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
    (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
        || echo "setup: could not install dataset-fashion-mnist; Fashion-MNIST then needs --data-dir" >&2
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && ! command -v chromedriver >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
        || echo "setup: could not install chromium and chromium-driver; the report's browser test will skip" >&2
fi
python3 -m pip install -q --disable-pip-version-check -c constraints.txt torch==2.13.0
python3 -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"

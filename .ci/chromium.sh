#!/usr/bin/env bash
# Installs Debian's chromium for the web UI's browser test
# (internal/web/uitest), unless a chromium binary is already on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	chromium --version || true
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
sudo_cmd=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	sudo_cmd="sudo -E"
fi
$sudo_cmd apt-get update -q
$sudo_cmd apt-get install -y -q --no-install-recommends chromium
chromium --version

#!/usr/bin/env bash
# Stops the Azurite emulator that .ci/azure/start.sh started in DIR.
#
#   .ci/s3/stop.sh DIR
#
# Sends SIGTERM, waits up to WEIR_AZURE_STOP_TIMEOUT seconds (default 5: the
# data is a test server's), then SIGKILL. It only signals the process whose
# pid is in DIR/server.pid, and only if that process is a azurite-blob serving
# DIR's data, so a stale pid file never hits an unrelated process. Nothing
# running is not an error. DIR (data, server.log) is left for inspection.
set -euo pipefail

say() { echo "azure: $*" >&2; }

if [ $# -ne 1 ] || [ -z "$1" ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
dir=$1
if [ ! -d "$dir" ]; then
	say "no directory $dir; nothing to stop"
	exit 0
fi
dir=$(cd "$dir" && pwd)
pidfile=$dir/server.pid
if [ ! -f "$pidfile" ]; then
	say "no server.pid in $dir; nothing to stop"
	exit 0
fi
pid=$(cat "$pidfile")
if ! [[ "$pid" =~ ^[0-9]+$ ]]; then
	say "error: $pidfile holds '$pid', not a pid"
	exit 1
fi

ours() {
	local cmdline
	cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ "$cmdline" == *azurite-blob* && "$cmdline" == *" --location $dir/data "* ]]
}
running() {
	local state
	state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

if ! running || ! ours; then
	say "azurite pid $pid from $dir is not running"
	rm -f "$pidfile"
	exit 0
fi

timeout=${WEIR_AZURE_STOP_TIMEOUT:-5}
start=$SECONDS
kill -TERM "$pid" 2>/dev/null || true
while running; do
	if [ $((SECONDS - start)) -ge "$timeout" ]; then
		say "azurite pid $pid still running ${timeout}s after SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			running || break
			sleep 0.1
		done
		break
	fi
	sleep 0.2
done
if running; then
	say "error: azurite pid $pid did not exit"
	exit 1
fi
rm -f "$pidfile"
say "stopped azurite pid $pid ($((SECONDS - start))s)"

#!/usr/bin/env bash
# Stops the Kafka broker that .ci/kafka/start.sh started in DIR.
#
#   .ci/kafka/stop.sh DIR
#
# Sends SIGTERM (a clean shutdown), waits up to WEIR_KAFKA_STOP_TIMEOUT
# seconds (default 30), then SIGKILL. It only signals the process whose pid
# is in DIR/broker.pid, and only if that process is a Kafka broker running
# from DIR, so a stale pid file never hits an unrelated process. Nothing
# running is not an error. DIR itself (config, data, broker.log) is left in
# place for inspection; remove it yourself.
set -euo pipefail

say() { echo "kafka: $*" >&2; }

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
pidfile=$dir/broker.pid
if [ ! -f "$pidfile" ]; then
	say "no broker.pid in $dir; nothing to stop"
	exit 0
fi
pid=$(cat "$pidfile")
if ! [[ "$pid" =~ ^[0-9]+$ ]]; then
	say "error: $pidfile holds '$pid', not a pid"
	exit 1
fi

ours() {
	# The broker was started with -Dweir.kafka.dir=DIR and class kafka.Kafka.
	local cmdline
	cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ "$cmdline" == *"-Dweir.kafka.dir=$dir "* && "$cmdline" == *" kafka.Kafka "* ]]
}
running() {
	local state
	state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || return 1
	[ "$state" != Z ]
}

if ! running || ! ours; then
	say "broker pid $pid from $dir is not running"
	rm -f "$pidfile"
	exit 0
fi

timeout=${WEIR_KAFKA_STOP_TIMEOUT:-30}
start=$SECONDS
kill -TERM "$pid" 2>/dev/null || true
while running; do
	if [ $((SECONDS - start)) -ge "$timeout" ]; then
		say "broker pid $pid still running ${timeout}s after SIGTERM; sending SIGKILL"
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
	say "error: broker pid $pid did not exit"
	exit 1
fi
rm -f "$pidfile"
say "stopped broker pid $pid ($((SECONDS - start))s)"

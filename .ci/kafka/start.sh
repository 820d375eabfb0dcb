#!/usr/bin/env bash
# Starts a real single-node Apache Kafka broker (KRaft mode, combined broker
# and controller) on 127.0.0.1 for the integration tests, in the background.
#
#   .ci/kafka/start.sh [DIR]
#
# DIR holds the broker's config, data and logs (broker.log); it is created if
# missing and must be empty or a directory this script used before (its old
# data is then wiped: every start is a new, empty cluster). Without DIR a new
# temporary directory is made. Stop the broker with `.ci/kafka/stop.sh DIR`.
#
# The broker's jars come from Maven Central: Maven resolves kafka_2.13 (at the
# version in pom.xml beside this script) and its runtime dependencies once, and
# they are cached under ~/.cache/weir-kafka, so later starts need neither Maven
# nor the network. Then the script writes DIR/server.properties from
# server.properties.template, formats the storage with a random cluster id,
# starts the broker with a small heap, and waits until it accepts connections
# and answers metadata requests (Ready.java).
#
# Progress goes to stderr. Standard output gets two lines, the last one being
# the bootstrap address for the tests:
#
#   KAFKA_DIR=/tmp/weir-kafka.XXXXXX
#   KAFKA_BROKERS=127.0.0.1:19092
#
# On any failure it says why on stderr (with the tail of the relevant log),
# stops the broker if it had started it, and exits non-zero.
#
# Environment (all optional):
#   WEIR_KAFKA_PORT             client port (default 19092); the controller
#                               listens on WEIR_KAFKA_CONTROLLER_PORT
#                               (default: client port + 1)
#   WEIR_KAFKA_VERSION          Kafka version (default: kafka.version in pom.xml)
#   WEIR_KAFKA_START_TIMEOUT    seconds to wait for the broker (default 90)
#   WEIR_KAFKA_HEAP             heap flags (default "-Xms128m -Xmx512m")
#   WEIR_KAFKA_LOG_LEVEL        broker log level (default INFO)
#   WEIR_KAFKA_CACHE            jar cache (default ${XDG_CACHE_HOME:-~/.cache}/weir-kafka)
#   JAVA_HOME                   the Java to run (default: java on PATH); 17+
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
t0=$EPOCHREALTIME

say() { echo "kafka: $*" >&2; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

broker_pid=
die() {
	# die MESSAGE [LOG]: report, show the log's tail, stop what we started.
	say "error: $1"
	if [ -n "${2:-}" ] && [ -f "$2" ]; then
		echo "----- last 60 lines of $2" >&2
		tail -n 60 "$2" >&2
		echo "-----" >&2
	fi
	if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
		say "stopping the broker (pid $broker_pid)"
		kill -KILL "$broker_pid" 2>/dev/null || true
		rm -f "$dir/broker.pid"
	fi
	exit 1
}
trap 'die "unexpected failure at line $LINENO of start.sh"' ERR

# ---- tools
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
	java=$JAVA_HOME/bin/java
elif command -v java >/dev/null 2>&1; then
	java=$(command -v java)
else
	die "java not found (Kafka 4 needs Java 17 or newer: set JAVA_HOME or put java on PATH)"
fi
java_version=$("$java" -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n 1)
java_major=${java_version%%.*}
if ! [[ "$java_major" =~ ^[0-9]+$ ]] || [ "$java_major" -lt 17 ]; then
	die "$java is Java '${java_version:-unknown}'; Kafka 4 needs Java 17 or newer"
fi
for tool in awk sed sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done

# ---- settings
version=${WEIR_KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml" | head -n 1)}
[ -n "$version" ] || die "no kafka.version in $here/pom.xml"
port=${WEIR_KAFKA_PORT:-19092}
cport=${WEIR_KAFKA_CONTROLLER_PORT:-$((port + 1))}
timeout=${WEIR_KAFKA_START_TIMEOUT:-90}
heap=${WEIR_KAFKA_HEAP:--Xms128m -Xmx512m}
loglevel=${WEIR_KAFKA_LOG_LEVEL:-INFO}
cache=${WEIR_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir-kafka}
for n in "$port" "$cport" "$timeout"; do
	[[ "$n" =~ ^[0-9]+$ ]] || die "not a number: '$n' (WEIR_KAFKA_PORT, WEIR_KAFKA_CONTROLLER_PORT, WEIR_KAFKA_START_TIMEOUT)"
done

# ---- the broker's directory
if [ -n "${1:-}" ]; then
	mkdir -p "$1"
	dir=$(cd "$1" && pwd)
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-kafka.XXXXXX")
fi
if [ ! -f "$dir/.weir-kafka" ] && [ -n "$(ls -A "$dir")" ]; then
	die "$dir is not empty and was not made by start.sh; give an empty or new directory"
fi
if [ -f "$dir/broker.pid" ]; then
	old=$(cat "$dir/broker.pid")
	if [ -n "$old" ] && kill -0 "$old" 2>/dev/null; then
		die "a broker from $dir is already running (pid $old); run .ci/kafka/stop.sh $dir first"
	fi
	rm -f "$dir/broker.pid"
fi
touch "$dir/.weir-kafka"
rm -rf "$dir/data" "$dir/broker.log" "$dir/format.log" "$dir/ready.log" "$dir/mvn.log"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$port" "$cport"; do
	if listening "$p"; then
		die "port $p on 127.0.0.1 is already in use (another broker? see 'ss -ltnp'); set WEIR_KAFKA_PORT to use others"
	fi
done

# ---- jars: resolved by Maven once, then cached. The cache key includes a hash
# of pom.xml so that a change to it resolves again.
key=$(sha256sum "$here/pom.xml" | cut -c1-12)
libs_home=$cache/$version-$key
libs=$libs_home/libs
mkdir -p "$cache"
t=$EPOCHREALTIME
resolve() {
	if [ -f "$libs_home/.complete" ]; then
		return 0
	fi
	command -v mvn >/dev/null 2>&1 || die "mvn not found: Maven is needed once to fetch the Kafka $version jars"
	say "resolving org.apache.kafka:kafka_2.13:$version and its dependencies with Maven (log: $dir/mvn.log)"
	local tmp
	tmp=$(mktemp -d "$cache/.resolve.XXXXXX")
	if ! mvn -B -ntp -f "$here/pom.xml" -Dkafka.version="$version" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/libs" \
		>"$dir/mvn.log" 2>&1; then
		rm -rf "$tmp"
		die "Maven could not resolve the Kafka $version jars" "$dir/mvn.log"
	fi
	[ -f "$tmp/libs/kafka_2.13-$version.jar" ] || { rm -rf "$tmp"; die "Maven ran but kafka_2.13-$version.jar is missing" "$dir/mvn.log"; }
	rm -rf "$libs_home"
	touch "$tmp/.complete"
	mv "$tmp" "$libs_home"
}
# Two starts at once must not resolve into the same directory.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$cache/.lock"
	flock 9
	resolve
	exec 9>&-
else
	resolve
fi
say "Kafka $version: $(find "$libs" -name "*.jar" | wc -l) jars in $libs ($(since "$t"))"
classpath="$libs/*"
log_opts=(-Dlog4j2.configurationFile="$here/log4j2.properties" -Dweir.kafka.loglevel="$loglevel")

# ---- config and storage
sed -e "s|@PORT@|$port|g" -e "s|@CONTROLLER_PORT@|$cport|g" -e "s|@DATA_DIR@|$dir/data|g" \
	"$here/server.properties.template" >"$dir/server.properties"
t=$EPOCHREALTIME
cluster_id=$("$java" -cp "$classpath" "${log_opts[@]}" -Dweir.kafka.loglevel=WARN \
	kafka.tools.StorageTool random-uuid 2>"$dir/format.log" | tail -n 1) ||
	die "could not make a cluster id" "$dir/format.log"
[[ "$cluster_id" =~ ^[A-Za-z0-9_-]{22}$ ]] || die "bad cluster id '$cluster_id'" "$dir/format.log"
"$java" -cp "$classpath" "${log_opts[@]}" -Dweir.kafka.loglevel=WARN \
	kafka.tools.StorageTool format --config "$dir/server.properties" --cluster-id "$cluster_id" --standalone \
	>>"$dir/format.log" 2>&1 || die "formatting the storage failed" "$dir/format.log"
say "formatted $dir/data as cluster $cluster_id ($(since "$t"))"

# ---- start. The subshell execs java, so $! is the broker's pid; its output
# goes to broker.log and it keeps none of this script's descriptors, so a
# caller reading our stdout through $(...) does not wait for the broker.
t=$EPOCHREALTIME
# shellcheck disable=SC2086 # $heap is a list of flags
(cd "$dir" && exec "$java" $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
	-XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
	"${log_opts[@]}" -Dweir.kafka.dir="$dir" \
	-cp "$classpath" kafka.Kafka "$dir/server.properties") \
	>"$dir/broker.log" 2>&1 </dev/null &
broker_pid=$!
echo "$broker_pid" >"$dir/broker.pid"
say "broker pid $broker_pid starting on 127.0.0.1:$port (controller :$cport, log $dir/broker.log)"

alive() {
	kill -0 "$broker_pid" 2>/dev/null || return 1
	# A child that exited stays a zombie until reaped; kill -0 succeeds on it.
	local state
	state=$(awk '{ print $3 }' "/proc/$broker_pid/stat" 2>/dev/null || echo X)
	[ "$state" != Z ] && [ "$state" != X ]
}
deadline=$((SECONDS + timeout))
until listening "$port"; do
	alive || die "the broker exited during startup" "$dir/broker.log"
	[ "$SECONDS" -lt "$deadline" ] || die "the broker did not open 127.0.0.1:$port within ${timeout}s" "$dir/broker.log"
	sleep 0.2
done
say "127.0.0.1:$port accepts connections ($(since "$t")); waiting for metadata"

# An open port is not a working broker: wait for answers to metadata requests.
remaining=$((deadline - SECONDS))
[ "$remaining" -ge 10 ] || remaining=10
"$java" -Xmx128m -XX:TieredStopAtLevel=1 -cp "$classpath" "${log_opts[@]}" -Dweir.kafka.loglevel=ERROR \
	"$here/Ready.java" "127.0.0.1:$port" "$remaining" >"$dir/ready.log" 2>&1 </dev/null &
ready_pid=$!
while kill -0 "$ready_pid" 2>/dev/null; do
	if ! alive; then
		kill "$ready_pid" 2>/dev/null || true
		wait "$ready_pid" 2>/dev/null || true
		die "the broker exited during startup" "$dir/broker.log"
	fi
	sleep 0.2
done
if ! wait "$ready_pid"; then
	cat "$dir/ready.log" >&2
	die "the broker did not answer metadata requests within ${timeout}s" "$dir/broker.log"
fi
alive || die "the broker exited during startup" "$dir/broker.log"

rss=$(awk '/^VmRSS:/ { printf "%d MiB", $2 / 1024 }' "/proc/$broker_pid/status" 2>/dev/null || echo "?")
say "$(tail -n 1 "$dir/ready.log")"
say "broker ready in $(since "$t") (total $(since "$t0")); pid $broker_pid, RSS $rss, heap '$heap'"
trap - ERR
echo "KAFKA_DIR=$dir"
echo "KAFKA_BROKERS=127.0.0.1:$port"

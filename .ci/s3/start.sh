#!/usr/bin/env bash
# Starts a real S3-compatible server, the Versity S3 Gateway (versitygw, an
# S3 API over a POSIX directory), on 127.0.0.1 for the integration tests, in
# the background.
#
#   .ci/s3/start.sh [DIR]
#
# DIR holds the server's data, its pid file (server.pid) and its log
# (server.log); it is created if missing, and data from an earlier start is
# wiped: every start is an empty server. Without DIR a new temporary
# directory is made. Stop the server with `.ci/s3/stop.sh DIR`.
#
# The server is built from versitygw's Go module, at the version below,
# through the Go module proxy, once: the binary is cached under
# ~/.cache/weir/versitygw-<version>/versitygw, so later starts build
# nothing. The script then starts the server with a random secret key,
# creates the bucket through the S3 API, and checks that an object goes in
# and comes back.
#
# Progress goes to stderr. Standard output gets shell lines for eval:
#
#   export WEIR_S3_ENDPOINT=http://127.0.0.1:18333
#   export WEIR_S3_ACCESS_KEY=weir
#   export WEIR_S3_SECRET_KEY=...
#   export WEIR_S3_BUCKET=weir
#   export WEIR_S3_DIR=/tmp/...
#
# Environment (all optional):
#   WEIR_S3_PORT            S3 port (default 18333)
#   WEIR_S3_START_TIMEOUT   seconds to wait for the server (default 90)
#   WEIR_S3_CACHE           binary cache (default ${XDG_CACHE_HOME:-~/.cache}/weir)
set -euo pipefail

version=v1.8.0
module=github.com/versity/versitygw
bucket=weir
access_key=weir

t0=$EPOCHREALTIME
say() { echo "s3: $*" >&2; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1fs", b - a }'; }

pid=
die() {
	say "error: $1"
	if [ -n "${2:-}" ] && [ -f "$2" ]; then
		echo "----- last 40 lines of $2" >&2
		tail -n 40 "$2" >&2
		echo "-----" >&2
	fi
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$dir/server.pid"
	fi
	exit 1
}

export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
command -v go >/dev/null || die "go not found"
command -v curl >/dev/null || die "curl not found"

dir=${1:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-s3.XXXXXX")
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/server.pid" ] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
	die "a server started in $dir is still running (pid $(cat "$dir/server.pid")): stop it with .ci/s3/stop.sh $dir"
fi

# The binary, built once.
cache=${WEIR_S3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir}/versitygw-$version
gw=$cache/versitygw
if [ ! -x "$gw" ]; then
	say "building versitygw $version from the Go module (once; cached in $cache)"
	tb=$EPOCHREALTIME
	mkdir -p "$cache"
	GOBIN="$cache" GOFLAGS= go install "$module/cmd/versitygw@$version" >&2 || die "building versitygw failed"
	say "built $gw in $(since "$tb")"
fi

port=${WEIR_S3_PORT:-18333}
# A server stopped a moment ago may still hold its port briefly.
for i in $(seq 25); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	[ "$i" -lt 25 ] || die "port $port is in use; set WEIR_S3_PORT to a free port"
	sleep 0.2
done

rm -rf "$dir/data"
mkdir -p "$dir/data"
secret_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

say "starting versitygw on 127.0.0.1:$port (data in $dir/data)"
# The root credentials go through the environment, not the command line,
# which other users of the machine can read.
ROOT_ACCESS_KEY_ID=$access_key ROOT_SECRET_ACCESS_KEY=$secret_key \
	nohup "$gw" --port "127.0.0.1:$port" --quiet posix "$dir/data" \
	>"$dir/server.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$dir/server.pid"

endpoint=http://127.0.0.1:$port
timeout=${WEIR_S3_START_TIMEOUT:-90}
deadline=$((SECONDS + timeout))
empty=$(printf '' | sha256sum | cut -d' ' -f1)
# The bucket is created with a signed PUT once the S3 API answers.
until out=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X PUT \
	--aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" -H "x-amz-content-sha256: $empty" \
	"$endpoint/$bucket" 2>/dev/null) && { [ "$out" = 200 ] || [ "$out" = 409 ]; }; do
	kill -0 "$pid" 2>/dev/null || die "versitygw exited" "$dir/server.log"
	[ "$SECONDS" -lt "$deadline" ] || die "no bucket after ${timeout}s (last HTTP status: ${out:-none})" "$dir/server.log"
	sleep 0.5
done
# And an object goes in and comes back. (curl signs the body's hash, but
# S3 wants it in a header too.)
curl -sS -f --max-time 10 -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" \
	-H "x-amz-content-sha256: $(printf ready | sha256sum | cut -d' ' -f1)" \
	--data-binary "ready" "$endpoint/$bucket/.ready" >/dev/null || die "writing a test object failed" "$dir/server.log"
[ "$(curl -sS -f --max-time 10 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" \
	-H "x-amz-content-sha256: $empty" "$endpoint/$bucket/.ready")" = ready ] \
	|| die "reading the test object back failed" "$dir/server.log"
curl -sS -f --max-time 10 -X DELETE --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" \
	-H "x-amz-content-sha256: $empty" "$endpoint/$bucket/.ready" >/dev/null || die "deleting the test object failed" "$dir/server.log"
say "ready at $endpoint, bucket $bucket, in $(since "$t0")"

echo "export WEIR_S3_ENDPOINT=$endpoint"
echo "export WEIR_S3_ACCESS_KEY=$access_key"
echo "export WEIR_S3_SECRET_KEY=$secret_key"
echo "export WEIR_S3_BUCKET=$bucket"
echo "export WEIR_S3_DIR=$dir"

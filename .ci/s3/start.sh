#!/usr/bin/env bash
# Starts a real S3-compatible server, SeaweedFS's S3 gateway (weed server
# -s3: master, volume server, filer and S3 API in one process), on
# 127.0.0.1 for the integration tests, in the background.
#
#   .ci/s3/start.sh [DIR]
#
# DIR holds the server's data, its S3 identity (s3.json) and its log
# (weed.log); it is created if missing, and data from an earlier start is
# wiped: every start is an empty server. Without DIR a new temporary
# directory is made. Stop the server with `.ci/s3/stop.sh DIR`.
#
# The server is built from SeaweedFS's Go module, at the version below,
# through the Go module proxy, once: the binary is cached under
# ~/.cache/weir/seaweedfs-<version>/weed, so later starts build nothing.
# The script then writes an identity with a random secret key, starts the
# server, waits until its S3 API answers, and creates the bucket.
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
#   WEIR_S3_PORT            S3 port (default 18333); the server's other
#                           components listen on the next 7 ports
#   WEIR_S3_START_TIMEOUT   seconds to wait for the server (default 90)
#   WEIR_S3_CACHE           binary cache (default ${XDG_CACHE_HOME:-~/.cache}/weir)
set -euo pipefail

version=v0.0.0-20261109003541-7506e5f91cd6
module=github.com/seaweedfs/seaweedfs
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
		rm -f "$dir/weed.pid"
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
if [ -f "$dir/weed.pid" ] && kill -0 "$(cat "$dir/weed.pid")" 2>/dev/null; then
	die "a server started in $dir is still running (pid $(cat "$dir/weed.pid")): stop it with .ci/s3/stop.sh $dir"
fi

# The binary, built once.
cache=${WEIR_S3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir}/seaweedfs-$version
weed=$cache/weed
if [ ! -x "$weed" ]; then
	say "building SeaweedFS $version from the Go module (once; cached in $cache)"
	tb=$EPOCHREALTIME
	src=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$src" ] && [ -d "$src" ] || die "go mod download $module@$version gave no source directory"
	mkdir -p "$cache"
	# The module's go.mod has replace directives, so go install
	# module@version refuses it: build inside the module instead.
	(cd "$src" && GOFLAGS= go build -trimpath -o "$weed.tmp" ./weed) >&2 || die "building weed failed"
	mv "$weed.tmp" "$weed"
	say "built $weed in $(since "$tb")"
fi

port=${WEIR_S3_PORT:-18333}
# A server stopped a moment ago may still hold its ports briefly.
for p in $(seq "$port" $((port + 7))); do
	for i in $(seq 25); do
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || continue 2
		sleep 0.2
	done
	die "port $p is in use; set WEIR_S3_PORT to a free range of 8 ports"
done

rm -rf "$dir/data"
mkdir -p "$dir/data"
secret_key=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
umask_old=$(umask)
umask 077
cat >"$dir/s3.json" <<JSON
{
  "identities": [
    {
      "name": "weir",
      "credentials": [{"accessKey": "$access_key", "secretKey": "$secret_key"}],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    }
  ]
}
JSON
umask "$umask_old"

say "starting weed server -s3 on 127.0.0.1:$port (data in $dir/data)"
nohup "$weed" server \
	-dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
	-master.port=$((port + 2)) -master.port.grpc=$((port + 3)) \
	-master.volumeSizeLimitMB=256 -volume.max=16 -master.telemetry=false \
	-volume.port=$((port + 4)) -volume.port.grpc=$((port + 5)) -volume.preStopSeconds=0 \
	-filer -filer.port=$((port + 6)) -filer.port.grpc=$((port + 7)) \
	-s3 -s3.port="$port" -s3.port.grpc=$((port + 1)) -s3.port.iceberg=0 -s3.port.lance=0 \
	-s3.config="$dir/s3.json" -s3.iam=false -s3.allowEmptyFolder=false \
	>"$dir/weed.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$dir/weed.pid"

endpoint=http://127.0.0.1:$port
timeout=${WEIR_S3_START_TIMEOUT:-90}
deadline=$((SECONDS + timeout))
# The bucket is created with a signed PUT; it succeeds once the S3 API,
# the filer and a volume are up.
until out=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X PUT \
	--aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" \
	"$endpoint/$bucket" 2>/dev/null) && { [ "$out" = 200 ] || [ "$out" = 409 ]; }; do
	kill -0 "$pid" 2>/dev/null || die "weed exited" "$dir/weed.log"
	[ "$SECONDS" -lt "$deadline" ] || die "no bucket after ${timeout}s (last HTTP status: ${out:-none})" "$dir/weed.log"
	sleep 0.5
done
# And an object goes in and comes back. (curl signs the body's hash, but
# S3 wants it in a header too.)
curl -sS -f --max-time 10 -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" \
	-H "x-amz-content-sha256: $(printf ready | sha256sum | cut -d' ' -f1)" \
	--data-binary "ready" "$endpoint/$bucket/.ready" >/dev/null || die "writing a test object failed" "$dir/weed.log"
[ "$(curl -sS -f --max-time 10 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" "$endpoint/$bucket/.ready")" = ready ] \
	|| die "reading the test object back failed" "$dir/weed.log"
say "ready at $endpoint, bucket $bucket, in $(since "$t0")"

echo "export WEIR_S3_ENDPOINT=$endpoint"
echo "export WEIR_S3_ACCESS_KEY=$access_key"
echo "export WEIR_S3_SECRET_KEY=$secret_key"
echo "export WEIR_S3_BUCKET=$bucket"
echo "export WEIR_S3_DIR=$dir"

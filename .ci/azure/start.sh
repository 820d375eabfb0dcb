#!/usr/bin/env bash
# Starts Azurite, Microsoft's emulator of the Azure Blob Storage API, on
# 127.0.0.1 for the azblob:// integration tests, in the background.
#
#   .ci/azure/start.sh [DIR]
#
# DIR holds the emulator's data, its pid file (server.pid) and its log
# (server.log); it is created if missing, and data from an earlier start is
# wiped. Without DIR a new temporary directory is made. Stop it with
# `.ci/azure/stop.sh DIR`.
#
# Azurite is installed from the npm registry, at the version below, once:
# it is cached under ~/.cache/weir/azurite-<version>, so later starts
# install nothing. The emulator runs with one storage account, "weir",
# whose key is random, and one container, "weir".
#
# Progress goes to stderr. Standard output gets shell lines for eval:
#
#   export WEIR_AZURE_ENDPOINT=127.0.0.1:10000
#   export WEIR_AZURE_ACCOUNT=weir
#   export WEIR_AZURE_KEY=...
#   export WEIR_AZURE_CONTAINER=weir
#   export WEIR_AZURE_DIR=/tmp/...
#
# Environment (all optional):
#   WEIR_AZURE_PORT            blob service port (default 10000)
#   WEIR_AZURE_START_TIMEOUT   seconds to wait for the emulator (default 60)
#   WEIR_AZURE_CACHE           install cache (default ${XDG_CACHE_HOME:-~/.cache}/weir)
set -euo pipefail

version=3.37.0
account=weir
container=weir

t0=$EPOCHREALTIME
say() { echo "azure: $*" >&2; }
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

command -v node >/dev/null || die "node not found (Azurite runs on Node.js)"
command -v npm >/dev/null || die "npm not found"
command -v curl >/dev/null || die "curl not found"
command -v openssl >/dev/null || die "openssl not found"

dir=${1:-}
if [ -z "$dir" ]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/weir-azure.XXXXXX")
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/server.pid" ] && kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
	die "an emulator started in $dir is still running (pid $(cat "$dir/server.pid")): stop it with .ci/azure/stop.sh $dir"
fi

cache=${WEIR_AZURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weir}/azurite-$version
bin=$cache/node_modules/.bin/azurite-blob
if [ ! -x "$bin" ]; then
	say "installing azurite $version from the npm registry (once; cached in $cache)"
	tb=$EPOCHREALTIME
	mkdir -p "$cache"
	npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "azurite@$version" >&2 || die "installing azurite failed"
	say "installed in $(since "$tb")"
fi

port=${WEIR_AZURE_PORT:-10000}
for i in $(seq 25); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	[ "$i" -lt 25 ] || die "port $port is in use; set WEIR_AZURE_PORT to a free port"
	sleep 0.2
done

rm -rf "$dir/data"
mkdir -p "$dir/data"
key=$(head -c 32 /dev/urandom | base64 | tr -d '\n')

say "starting azurite-blob on 127.0.0.1:$port (data in $dir/data)"
# The account's key goes through the environment, not the command line,
# which other users of the machine can read.
AZURITE_ACCOUNTS="$account:$key" nohup "$bin" --blobHost 127.0.0.1 --blobPort "$port" \
	--location "$dir/data" --skipApiVersionCheck --disableProductStyleUrl \
	>"$dir/server.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$dir/server.pid"

timeout=${WEIR_AZURE_START_TIMEOUT:-60}
deadline=$((SECONDS + timeout))
# The container is created with a request signed by the account's shared
# key (Azure's SharedKey scheme) once the emulator answers: 201 created,
# 409 already there.
hexkey=$(printf '%s' "$key" | base64 -d | od -An -tx1 | tr -d ' \n')
create_container() {
	local date ver=2021-08-06 sig
	date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
	sig=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container' \
		"$date" "$ver" "$account" "$account" "$container" |
		openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64)
	curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X PUT -H "x-ms-date: $date" -H "x-ms-version: $ver" \
		-H "Content-Length: 0" -H "Authorization: SharedKey $account:$sig" \
		"http://127.0.0.1:$port/$account/$container?restype=container" 2>/dev/null
}
until code=$(create_container) && { [ "$code" = 201 ] || [ "$code" = 409 ]; }; do
	kill -0 "$pid" 2>/dev/null || die "azurite exited" "$dir/server.log"
	[ "$SECONDS" -lt "$deadline" ] || die "no container after ${timeout}s (last HTTP status: ${code:-none})" "$dir/server.log"
	sleep 0.3
done
say "ready at 127.0.0.1:$port, account $account, container $container, in $(since "$t0")"

echo "export WEIR_AZURE_ENDPOINT=127.0.0.1:$port"
echo "export WEIR_AZURE_ACCOUNT=$account"
echo "export WEIR_AZURE_KEY=$key"
echo "export WEIR_AZURE_CONTAINER=$container"
echo "export WEIR_AZURE_DIR=$dir"

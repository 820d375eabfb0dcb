#!/usr/bin/env bash
# Fetches the web dashboard of Apache Flink (the web/ folder of
# org.apache.flink:flink-runtime-web from Maven Central) for the test that
# drives it against weir's REST API (internal/web/flinkui), one
# subdirectory per version under the cache directory it prints on its last
# line: WEIR_FLINK_DASHBOARDS=<dir>. A version already there is not
# fetched again.
set -euo pipefail
cache=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/flink-dashboard}
versions=(1.20.3 2.3.0)
mkdir -p "$cache"
for v in "${versions[@]}"; do
	if [ -f "$cache/$v/web/index.html" ]; then
		continue
	fi
	tmp=$(mktemp -d)
	jar="$tmp/flink-runtime-web-$v.jar"
	curl -sSfL --retry 3 -o "$jar" "https://repo1.maven.org/maven2/org/apache/flink/flink-runtime-web/$v/flink-runtime-web-$v.jar"
	if command -v unzip >/dev/null 2>&1; then
		(cd "$tmp" && unzip -q "$jar" 'web/*')
	elif command -v jar >/dev/null 2>&1; then
		(cd "$tmp" && jar xf "$jar" web)
	else
		python3 - "$jar" "$tmp" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("web/")])
PY
	fi
	[ -f "$tmp/web/index.html" ] || { echo "flink-dashboard: $jar holds no web/index.html" >&2; exit 1; }
	rm -rf "$cache/$v"
	mkdir -p "$cache/$v"
	mv "$tmp/web" "$cache/$v/web"
	rm -rf "$tmp"
	echo "fetched Flink $v's dashboard into $cache/$v/web" >&2
done
echo "WEIR_FLINK_DASHBOARDS=$cache"

#!/usr/bin/env bash
# Builds the Flink side of the side-by-side benchmarks (bench/flink) for
# TestBenchGatewayMeterVsFlink and TestBenchNexmarkVsFlink, installing Debian's Java 17 and Maven unless
# java and mvn are already on PATH. Maven keeps its downloads in ~/.m2, so
# later builds are offline. Prints WEIR_FLINK_JAR=<path>.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	sudo_cmd=""
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
		sudo_cmd="sudo -E"
	fi
	$sudo_cmd apt-get update -q >&2
	$sudo_cmd apt-get install -y -q --no-install-recommends openjdk-17-jdk-headless maven >&2
fi
java -version >&2
mvn -q -B -f bench/flink/pom.xml package >&2
echo "WEIR_FLINK_JAR=$PWD/bench/flink/target/weir-flink-bench.jar"

#!/usr/bin/env bash
# Installs the system packages topk's demo (`topk run`) and tests need, when
# they are missing and only then:
#
#   redis-server  started by pkg/devenv as a throwaway child process
#   redis-tools   redis-cli, for poking at the data by hand
#
# Debian/Ubuntu (apt) only. Idempotent: when everything is present it prints
# one line and changes nothing. It never installs Go (bring your own) and never
# starts a system redis service; if Debian's package starts one on port 6379
# it is left alone, and topk's code does not use it.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*"; }

version_of() { # prints e.g. "7.0.15" for redis-server/redis-cli
	"$1" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n1 || true
}

# command -> Debian package that provides it
declare -A pkg_for=(
	[redis-server]=redis-server
	[redis-cli]=redis-tools
)

missing_pkgs=()
for cmd in redis-server redis-cli; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing_pkgs+=("${pkg_for[$cmd]}")
	fi
done

if ! command -v go >/dev/null 2>&1; then
	log "warning: go not found in PATH; this script does not install Go (install Go 1.26 first)" >&2
fi

found() {
	printf 'redis-server %s, redis-cli %s' "$(version_of redis-server)" "$(version_of redis-cli)"
}

if [ "${#missing_pkgs[@]}" -eq 0 ]; then
	log "found $(found); nothing to install"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	log "missing ${missing_pkgs[*]} and apt-get is not available; install Redis 7 (redis-server and redis-cli) with your package manager, e.g. 'brew install redis'" >&2
	exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		log "need root to install ${missing_pkgs[*]}, and sudo is not available; run this script as root" >&2
		exit 1
	fi
	SUDO=(sudo)
fi

apt_log=$(mktemp)
trap 'rm -f "$apt_log"' EXIT
if ! { "${SUDO[@]}" apt-get update -qq &&
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}"; } >"$apt_log" 2>&1; then
	cat "$apt_log" >&2
	log "apt-get failed installing ${missing_pkgs[*]}" >&2
	exit 1
fi

for cmd in redis-server redis-cli; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		log "installed ${missing_pkgs[*]} but $cmd is still not in PATH" >&2
		exit 1
	fi
done
log "installed ${missing_pkgs[*]}; found $(found)"

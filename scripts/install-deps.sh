#!/usr/bin/env bash
# Installs the system packages topk's demo (`topk run`) and tests need, when
# they are missing and only then:
#
#   redis-server  started by pkg/devenv as a throwaway child process
#   redis-tools   redis-cli, for poking at the data by hand
#   postgresql    initdb and postgres, started by pkg/devenv as a throwaway
#                 server for the raw activity events (Debian keeps them in
#                 /usr/lib/postgresql/<version>/bin, not in PATH)
#   chromium      the headless browser pkg/api's page test drives
#                 (chromedp); the test fails without it
#
# Debian/Ubuntu (apt) only. Idempotent: when everything is present it prints
# one line and changes nothing. It never installs Go (bring your own) and never
# starts a system redis or postgresql service; if Debian's packages start one
# (on port 6379 or 5432) it is left alone, and topk's code does not use it.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*"; }

version_of() { # prints e.g. "7.0.15" for redis-server/redis-cli, "15.18" for postgres
	"$1" --version 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)+' | head -n1 || true
}

# postgres_bin prints the directory holding initdb and postgres, as
# pkg/devenv finds it: initdb's in PATH, else Debian's newest version's.
postgres_bin() {
	local d
	if d=$(command -v initdb 2>/dev/null) && [ -x "$(dirname "$d")/postgres" ]; then
		dirname "$d"
		return
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rn); do
		if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return
		fi
	done
}

# command -> Debian package that provides it
declare -A pkg_for=(
	[redis-server]=redis-server
	[redis-cli]=redis-tools
	[chromium]=chromium
)

missing_pkgs=()
for cmd in redis-server redis-cli chromium; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing_pkgs+=("${pkg_for[$cmd]}")
	fi
done
if [ -z "$(postgres_bin)" ]; then
	missing_pkgs+=(postgresql)
fi

if ! command -v go >/dev/null 2>&1; then
	log "warning: go not found in PATH; this script does not install Go (install Go 1.26 first)" >&2
fi

found() {
	printf 'redis-server %s, redis-cli %s, postgres %s, chromium %s' "$(version_of redis-server)" "$(version_of redis-cli)" \
		"$(version_of "$(postgres_bin)/postgres")" "$(version_of chromium)"
}

if [ "${#missing_pkgs[@]}" -eq 0 ]; then
	log "found $(found); nothing to install"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	log "missing ${missing_pkgs[*]} and apt-get is not available; install Redis 7 (redis-server and redis-cli), PostgreSQL (initdb and postgres in PATH) and Chromium (chromium in PATH) with your package manager, e.g. 'brew install redis postgresql chromium'" >&2
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

for cmd in redis-server redis-cli chromium; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		log "installed ${missing_pkgs[*]} but $cmd is still not in PATH" >&2
		exit 1
	fi
done
if [ -z "$(postgres_bin)" ]; then
	log "installed ${missing_pkgs[*]} but initdb and postgres are neither in PATH nor in /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
log "installed ${missing_pkgs[*]}; found $(found)"

#!/usr/bin/env bash
# Installs the system packages topk needs, when they are missing and only then:
#
#   scripts/install-deps.sh [run|test]
#
# run (`make run` and `make bench`): what `topk run` starts
#   redis-server  7.0 or later (topk's Lua scripts use Redis 7's script
#                 flags, EVALSHA_RO and CLUSTER SHARDS), started by
#                 pkg/devenv as a throwaway child process
#   redis-cli     (redis-tools) for poking at the data by hand, and the
#                 Redis Cluster tests
#   postgresql    initdb and postgres, started by pkg/devenv as a throwaway
#                 server for the raw activity events (Debian keeps them in
#                 /usr/lib/postgresql/<version>/bin, not in PATH)
#   make          not in a minimal Debian (debootstrap minbase, the debian
#                 Docker image), so a new user there runs this script
#                 before the first make
#   ca-certificates  the roots Go's module downloads verify
#                 proxy.golang.org against (apt systems only: the go command
#                 reads /etc/ssl/certs/ca-certificates.crt there); without
#                 them the first build fails with "x509: certificate signed
#                 by unknown authority"
# test (the default; `make test`, CI): all of the above, and
#   gcc, libc6-dev  a C compiler and the C library's headers and start
#                 files: `go test -race` needs cgo. (gcc alone is not enough
#                 with --no-install-recommends: libc6-dev is only its
#                 recommendation.)
#   a Chromium    the headless browser pkg/api's page test drives (chromedp);
#                 any of chromium, chromium-browser, google-chrome or
#                 google-chrome-stable in PATH will do (the names the test
#                 looks for). Debian: the chromium package. Ubuntu has no
#                 Chromium deb (its chromium-browser package only installs
#                 the snap), so there: `snap install chromium` when snapd
#                 runs; else (a container without snapd) a warning saying
#                 what to install, and the page test fails naming this
#                 script. The browser is for that test only: `make run`
#                 needs none.
#   redis-sentinel  Debian's redis-sentinel package, for the Sentinel
#                 failover tests (pkg/devenv starts three sentinels; Debian
#                 and Ubuntu both ship it). Were the binary still missing,
#                 pkg/devenv falls back to `redis-server --sentinel`, the
#                 same program under another name.
#
# Debian and Ubuntu (apt) only. Debian 12 and Ubuntu 24.04 ship Redis 7.0;
# Debian 11 and Ubuntu 22.04 ship 6.0, which this script finds too old and
# says so (install Redis 7 from packages.redis.io there). Idempotent: when
# everything is present it prints one line and changes nothing. It never
# installs Go (bring your own) and never starts a system redis or
# postgresql service; if Debian's packages start one (on port 6379 or 5432)
# it is left alone, and topk's code does not use it.
#
# TOPK_OS_RELEASE names the os-release file to read (default
# /etc/os-release), for testing the Ubuntu branch elsewhere.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*"; }

usage() { printf 'usage: %s [run|test]\n' "$0"; }

mode=test
case $# in
0) ;;
1) mode=$1 ;;
*)
	usage >&2
	exit 2
	;;
esac
case $mode in
run | test) ;;
-h | --help)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac

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

# browser prints the first Chromium-based browser in PATH, as pkg/api's
# page test looks for one.
browser() {
	local b
	for b in chromium chromium-browser google-chrome google-chrome-stable; do
		if command -v "$b" 2>/dev/null; then
			return
		fi
	done
}

# c_compiler prints the C compiler cgo uses (go env CC, else gcc).
c_compiler() {
	local cc=
	if command -v go >/dev/null 2>&1; then
		cc=$(go env CC 2>/dev/null || true)
	fi
	echo "${cc:-gcc}"
}

# cc_works reports whether the C compiler builds and links a program that
# includes a libc header, as cgo needs.
cc_works() {
	local cc out
	cc=$(c_compiler)
	command -v "${cc%% *}" >/dev/null 2>&1 || return 1
	out=$(mktemp)
	if printf '#include <stdlib.h>\nint main(void) { return EXIT_SUCCESS; }\n' |
		$cc -x c -o "$out" - >/dev/null 2>&1; then
		rm -f "$out"
		return 0
	fi
	rm -f "$out"
	return 1
}

# redis_new_enough fails, saying why, unless redis-server is 7.0 or later.
redis_new_enough() {
	local v
	v=$(version_of redis-server)
	if [ -z "$v" ] || [ "${v%%.*}" -lt 7 ]; then
		log "redis-server ${v:-of unknown version} ($(command -v redis-server)) is too old: topk's Lua scripts need Redis 7.0 or later. Debian 12 and Ubuntu 24.04 ship 7.0; on Debian 11 or Ubuntu 22.04 (6.0) install Redis 7 from packages.redis.io and put its redis-server first in PATH" >&2
		return 1
	fi
}

is_ubuntu() { # Ubuntu or a derivative (ID_LIKE=ubuntu: Mint, Pop!_OS)
	local f=${TOPK_OS_RELEASE:-/etc/os-release} id like
	[ -r "$f" ] || return 1
	id=$(. "$f" && echo "${ID:-}")
	like=$(. "$f" && echo "${ID_LIKE:-}")
	[ "$id" = ubuntu ] || [[ " $like " == *" ubuntu "* ]]
}

# command -> Debian package that provides it
declare -A pkg_for=(
	[redis-server]=redis-server
	[redis-cli]=redis-tools
	[make]=make
)

missing_pkgs=()
for cmd in redis-server redis-cli make; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing_pkgs+=("${pkg_for[$cmd]}")
	fi
done
if command -v redis-server >/dev/null 2>&1; then
	redis_new_enough || exit 1 # apt would not upgrade it
fi
if [ -z "$(postgres_bin)" ]; then
	missing_pkgs+=(postgresql)
fi
ca_file=/etc/ssl/certs/ca-certificates.crt
if command -v apt-get >/dev/null 2>&1 && [ ! -s "$ca_file" ]; then
	missing_pkgs+=(ca-certificates)
fi
snap_chromium=false
if [ "$mode" = test ]; then
	if ! cc_works; then
		missing_pkgs+=(gcc libc6-dev)
	fi
	if ! command -v redis-sentinel >/dev/null 2>&1; then
		missing_pkgs+=(redis-sentinel)
	fi
	if [ -z "$(browser)" ]; then
		if is_ubuntu; then
			snap_chromium=true
		else
			missing_pkgs+=(chromium)
		fi
	fi
fi

if ! command -v go >/dev/null 2>&1; then
	log "warning: go not found in PATH; this script does not install Go (install Go 1.26 first)" >&2
fi

found() {
	printf 'redis-server %s, redis-cli %s, postgres %s' "$(version_of redis-server)" "$(version_of redis-cli)" \
		"$(version_of "$(postgres_bin)/postgres")"
	if [ "$mode" = test ]; then
		local b
		b=$(browser)
		local cc
		cc=$(c_compiler)
		# CC may carry flags ("gcc -m64"): the version is the command's.
		printf ', %s %s' "$cc" "$(version_of "${cc%% *}")"
		printf ', redis-sentinel %s' "$(version_of redis-sentinel)"
		printf ', %s' "${b:-no browser}"
		if [ -n "$b" ]; then
			printf ' %s' "$(version_of "$b")"
		fi
	fi
}

if [ "${#missing_pkgs[@]}" -eq 0 ] && ! $snap_chromium; then
	log "found $(found); nothing to install"
	exit 0
fi

what="${missing_pkgs[*]}"
if $snap_chromium; then
	what="${what:+$what and }the chromium snap"
fi

if [ "${#missing_pkgs[@]}" -gt 0 ] && ! command -v apt-get >/dev/null 2>&1; then
	log "missing ${missing_pkgs[*]} and apt-get is not available; install Redis 7 (redis-server and redis-cli) and PostgreSQL (initdb and postgres in PATH) with your package manager, e.g. 'brew install redis postgresql'; for make test also a C compiler with the C library's headers, and Chromium (chromium in PATH)" >&2
	exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		log "need root to install $what, and sudo is not available; run this script as root" >&2
		exit 1
	fi
	SUDO=(sudo)
fi

cmd_log=$(mktemp)
trap 'rm -f "$cmd_log"' EXIT
if [ "${#missing_pkgs[@]}" -gt 0 ]; then
	if ! { "${SUDO[@]}" apt-get update -qq &&
		"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}"; } >"$cmd_log" 2>&1; then
		cat "$cmd_log" >&2
		log "apt-get failed installing ${missing_pkgs[*]}" >&2
		exit 1
	fi
fi

if $snap_chromium; then
	# Ubuntu's only Chromium. snapd needs systemd: containers rarely have it.
	if command -v snap >/dev/null 2>&1 && snap version 2>/dev/null | grep '^snapd .*[0-9]' >/dev/null; then
		if ! "${SUDO[@]}" snap install chromium >"$cmd_log" 2>&1; then
			cat "$cmd_log" >&2
			log "warning: snap install chromium failed; pkg/api's page test (make test) needs a Chromium: install Google Chrome (google-chrome-stable) or put one in PATH as chromium" >&2
			snap_chromium=false
		elif [ -z "$(browser)" ]; then
			log "warning: installed the chromium snap in /snap/bin, which is not in PATH here; add it (login shells have it) for pkg/api's page test to find chromium" >&2
		fi
	else
		log "warning: Ubuntu ships Chromium only as a snap (its chromium-browser deb installs the snap), and snapd is not running here; pkg/api's page test (make test) needs a Chromium: install Google Chrome (google-chrome-stable) or put a Chromium in PATH as chromium, then rerun. make run needs no browser" >&2
		snap_chromium=false
	fi
	what="${missing_pkgs[*]}"
	if $snap_chromium; then
		what="${what:+$what and }the chromium snap"
	fi
fi

for cmd in redis-server redis-cli make; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		log "installed $what but $cmd is still not in PATH" >&2
		exit 1
	fi
done
redis_new_enough || exit 1
if [ -z "$(postgres_bin)" ]; then
	log "installed $what but initdb and postgres are neither in PATH nor in /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
if [ "$mode" = test ]; then
	if ! cc_works; then
		log "installed $what but $(c_compiler) still cannot build a C program (go test -race needs cgo)" >&2
		exit 1
	fi
	if [ -z "$(browser)" ] && ! is_ubuntu; then
		log "installed $what but no chromium is in PATH" >&2
		exit 1
	fi
fi
if [ -z "$what" ]; then
	log "installed nothing; found $(found)"
else
	log "installed $what; found $(found)"
fi

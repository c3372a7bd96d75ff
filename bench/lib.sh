# bench/lib.sh — helpers sourced by the bench/ scripts (not run on its own).
#
#   need TOOL…            exit 2 with one line when a tool is missing
#   need_root             exit 2 unless root
#   linerate_bin          sets BIN (LINERATE or target/release/linerate,
#                         built if missing) and exports LINERATE_AUTH_KEY (a
#                         fixed bench key unless set) for the server and its
#                         clients: a server without a key serves loopback only
#   veth_pair TAG A_IP B_IP
#                         two namespaces lr-<TAG><pid>a / …b joined by a veth
#                         pair (lr-<TAG>A ↔ lr-<TAG>B, /24 addresses), sets A
#                         and B; removed, with every background job started by
#                         bg_B and the scratch directory TMPD when set, by a
#                         trap on EXIT, INT and TERM
#   inA CMD…, inB CMD…    run in namespace A or B
#   bg_B CMD…             start CMD in B in the background (output dropped)
#   stop_bg               stop the newest bg_B job
#   json EXPR             evaluate a Python expression over the JSON on stdin
#                         (bound to d)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PIDS=()

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$(basename "$0"): $tool is missing (apt-get install $tool)" >&2; exit 2; }
    done
}

need_root() {
    [ "$(id -u)" = 0 ] || { echo "$(basename "$0"): needs root (network namespaces)" >&2; exit 2; }
}

linerate_bin() {
    BIN=${LINERATE:-$HERE/target/release/linerate}
    if [ ! -x "$BIN" ]; then
        (cd "$HERE" && cargo build --release -p linerate >&2)
    fi
    export LINERATE_AUTH_KEY=${LINERATE_AUTH_KEY:-linerate-bench-key-0123456789}
}

_lib_cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -n "${A:-}" ] && ip netns del "$A" 2>/dev/null || true
    [ -n "${B:-}" ] && ip netns del "$B" 2>/dev/null || true
    [ -n "${TMPD:-}" ] && rm -rf "$TMPD" || true
}

veth_pair() {
    local tag=$1 ip_a=$2 ip_b=$3
    A=lr-$tag$$a
    B=lr-$tag$$b
    trap _lib_cleanup EXIT
    trap 'exit 130' INT TERM
    ip netns add "$A"
    ip netns add "$B"
    ip link add "lr-${tag}A" netns "$A" type veth peer name "lr-${tag}B" netns "$B"
    ip -n "$A" addr add "$ip_a/24" dev "lr-${tag}A"
    ip -n "$B" addr add "$ip_b/24" dev "lr-${tag}B"
    for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
    ip -n "$A" link set "lr-${tag}A" up
    ip -n "$B" link set "lr-${tag}B" up
}

inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
bg_B() { ip netns exec "$B" "$@" >/dev/null 2>&1 & PIDS+=($!); sleep 0.5; }
stop_bg() { kill "${PIDS[-1]}" 2>/dev/null || true; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'; }

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

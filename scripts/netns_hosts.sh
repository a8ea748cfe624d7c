#!/usr/bin/env bash
# Hosts made of network namespaces on this machine, joined by a bridge, for multi-host runs of
# mpirun over TCP (root only: ip netns needs CAP_SYS_ADMIN).
#
#   netns_hosts.sh up DIR N           N hosts; writes DIR/hostfile, DIR/agent (mpirun's rsh
#                                     agent: runs a command in the namespace of the host it is
#                                     given), DIR/mpirun.args (one mpirun argument per line) and
#                                     DIR/state (what `down` removes; its owner line names
#                                     the process that made them: the caller of `up`)
#   netns_hosts.sh down DIR           removes the namespaces, links and bridge of DIR
#   netns_hosts.sh link DIR I up|down sets host I's link (1-based) up or down: a cut cable
#   netns_hosts.sh mpirun N [MPIRUN ARGS...]
#                                     up, mpirun across the N hosts, down; exits with mpirun's
#                                     status (77 with a reason when namespaces are not permitted).
# `up` and `mpirun` first remove the hosts under /tmp/hp-netns.* and /tmp/hp-bench-hosts.* that
# a killed run left behind (their owner is gone).
#
# Layout: bridge hpb<id> in this namespace holds 10.231.<s>.254/24; host i is namespace
# hpn<id>-<i> whose link hplink holds 10.231.<s>.<i>, its veth peer hpv<id>-<i> on the bridge.
# mpirun runs here and reaches every host's daemon through the bridge, so every rank is on a
# "remote" host. A host's commands also get its own hostname (the namespace's name, in a UTS
# namespace): Open MPI and UCX tell hosts apart by name. The hosts share this machine's file
# systems (/dev/shm included), so UCX is limited to its tcp transport (UCX_TLS) and ranks on
# different hosts talk only through the links.
set -euo pipefail

die() {
  echo "netns_hosts.sh: $*" >&2
  exit 1
}

# Whether this process may create network namespaces; prints the reason when it may not.
can_create() {
  local probe="hpprobe$$"
  if ! command -v ip >/dev/null; then
    echo "ip (iproute2) is not installed"
    return 1
  fi
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add is not permitted here (needs root)"
    return 1
  fi
  ip netns del "$probe"
}

up() {
  local dir="$1" n="$2" owner="${3:-$PPID}"  # owner: the process whose hosts these are
  [[ "$n" =~ ^[1-9][0-9]?$ && "$n" -le 16 ]] || die "up: N must be 1..16, not '$n'"
  mkdir -p "$dir"
  [[ ! -e "$dir/state" ]] || die "up: $dir already holds hosts ($dir/state); run down first"
  local id subnet s
  id="$(printf '%04x' $((RANDOM % 65536)))"
  for _ in $(seq 64); do
    s=$((RANDOM % 250))
    if ! ip -o addr show | grep -q " 10\.231\.$s\."; then break; fi
  done
  subnet="10.231.$s"
  local bridge="hpb$id"
  echo "owner $owner" >"$dir/state"
  echo "bridge $bridge" >>"$dir/state"
  ip link add "$bridge" type bridge
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  : >"$dir/hostfile"
  local cases=""
  for i in $(seq "$n"); do
    local ns="hpn$id-$i" peer="hpv$id-$i"
    echo "netns $ns" >>"$dir/state"
    ip netns add "$ns"
    ip link add "$peer" type veth peer name "hpw$id-$i"
    ip link set "hpw$id-$i" netns "$ns"
    ip -n "$ns" link set "hpw$id-$i" name hplink
    ip -n "$ns" addr add "$subnet.$i/24" dev hplink
    ip -n "$ns" link set hplink up
    ip -n "$ns" link set lo up
    ip link set "$peer" master "$bridge"
    ip link set "$peer" up
    echo "host $i $ns $peer $subnet.$i" >>"$dir/state"
    echo "$subnet.$i slots=64" >>"$dir/hostfile"
    cases+="  $subnet.$i) ns=$ns ;;"$'\n'
  done
  cat >"$dir/agent" <<EOF
#!/bin/sh
# mpirun's rsh agent: "agent [options] HOST COMMAND..." runs COMMAND in HOST's namespace.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host="\$1"
shift
case "\$host" in
$cases  *) echo "netns agent: \$host is not a host of $dir" >&2; exit 255 ;;
esac
# Its own hostname too (a UTS namespace): Open MPI and UCX tell hosts apart by name.
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns && \$*"
EOF
  chmod +x "$dir/agent"
  # The hosts share this machine's CPUs, which Open MPI cannot see: --bind-to none (each host's
  # daemon would bind its first rank to the same first core) and mpi_yield_when_idle (a rank
  # waiting in MPI yields its CPU, as Open MPI does on a host with more ranks than slots).
  cat >"$dir/mpirun.args" <<EOF
--map-by
node
--bind-to
none
--mca
mpi_yield_when_idle
1
--hostfile
$dir/hostfile
--mca
plm_rsh_agent
$dir/agent
--mca
oob_tcp_if_include
$subnet.0/24
--mca
btl_tcp_if_include
$subnet.0/24
-x
UCX_TLS=tcp,self
-x
UCX_NET_DEVICES=hplink
EOF
}

down() {
  local dir="$1"
  [[ -f "$dir/state" ]] || return 0
  local kind name
  while read -r kind name _; do
    case "$kind" in
      netns) ip netns pids "$name" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
             ip netns del "$name" 2>/dev/null || true ;;
      bridge) ip link del "$name" 2>/dev/null || true ;;
    esac
  done <"$dir/state"
  rm -f "$dir/state" "$dir/hostfile" "$dir/agent" "$dir/mpirun.args"
}

link() {
  local dir="$1" i="$2" state="$3"
  [[ "$state" == up || "$state" == down ]] || die "link: the state is up or down, not '$state'"
  local peer
  peer="$(awk -v i="$i" '$1 == "host" && $2 == i { print $4 }' "$dir/state")"
  [[ -n "$peer" ]] || die "link: $dir has no host $i"
  ip link set "$peer" "$state"
}

# Removes the hosts of runs whose owner process is gone (killed before its cleanup ran).
remove_stale() {
  local state owner
  for state in /tmp/hp-netns.*/state /tmp/hp-bench-hosts.*/state; do
    [[ -f "$state" ]] || continue
    owner="$(awk '$1 == "owner" { print $2 }' "$state")"
    if [[ -n "$owner" ]] && ! kill -0 "$owner" 2>/dev/null; then
      down "$(dirname "$state")"
      rm -rf "$(dirname "$state")"
    fi
  done
}

run_mpirun() {
  local n="$1"
  shift
  local reason
  if ! reason="$(can_create)"; then
    echo "netns_hosts.sh: skipped: $reason" >&2
    exit 77
  fi
  remove_stale
  local dir
  dir="$(mktemp -d /tmp/hp-netns.XXXXXX)"
  trap 'down "$dir"; rm -rf "$dir"' EXIT
  trap 'exit 143' TERM INT HUP
  up "$dir" "$n" "$$"
  local args=()
  mapfile -t args <"$dir/mpirun.args"
  local status=0
  mpirun "${args[@]}" "$@" || status=$?
  exit "$status"
}

case "${1:-}" in
  up) [[ $# -eq 3 ]] || die "usage: up DIR N"; remove_stale; up "$2" "$3" ;;
  down) [[ $# -eq 2 ]] || die "usage: down DIR"; down "$2" ;;
  link) [[ $# -eq 4 ]] || die "usage: link DIR I up|down"; link "$2" "$3" "$4" ;;
  mpirun) [[ $# -ge 3 ]] || die "usage: mpirun N [MPIRUN ARGS...]"; shift; run_mpirun "$@" ;;
  *) die "usage: netns_hosts.sh up DIR N | down DIR | link DIR I up|down | mpirun N [ARGS...]" ;;
esac

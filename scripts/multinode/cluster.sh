#!/bin/bash
# Vendored from /work/shared/multinode/cluster.sh (the team's own script, copied so that a clean
# clone has it; change it there and here together). Used by `cargo xtask multinode` and
# `cargo xtask bench --multinode`.
# cluster.sh — N pretend nodes on one Linux host, for multi-node tests without a cluster.
#
#   sudo ./cluster.sh up [ssh] [slurm]    # N=8 by default (N=... to change, up to 1000)
#   sudo ./cluster.sh exec 3 hostname     # run a command "on node3"
#   sudo ./cluster.sh down                # kill what up started (by pid file), delete every netns/link
#
# Node i is: network namespace pmxn$i (veth pmxv$i <-> its eth0, on bridge pmxbr0), address
# 10.77.<i/200>.<i%200+1>/16, its own hostname node$i (UTS ns), its own /etc/hosts and /tmp
# (mount ns; /tmp must be per node: Slurm's mpi/pmix puts /tmp/spmix_appdir_<uid>_<job>.<step>
# there, and one shared /tmp makes every step fail with EEXIST). The host is 10.77.255.254.
# nsenter --net is used, not `ip netns exec`: the latter remounts /sys, which hides
# /sys/fs/cgroup, and slurmd 22.05 then refuses to start ("Unable to initialize cgroup plugin").
# Needs: iproute2, util-linux; `ssh`: openssh-server; `slurm`: slurmd slurmctld slurm-client munge.
set -eu
N=${N:-8}; R=${R:-/var/tmp/pmxcluster}; BR=pmxbr0; HOSTIP=10.77.255.254
ip_of() { echo "10.77.$(($1 / 200)).$(($1 % 200 + 1))"; }

node_exec() { # node_exec I CMD... : CMD inside node I's namespaces
    local i=$1; shift
    mkdir -p "$R/tmp/node$i"; chmod 1777 "$R/tmp/node$i"
    nsenter --net=/run/netns/pmxn$i unshare --uts --mount --propagation private \
        sh -c 'mount --bind "$1" /etc/hosts && mount --bind "$2" /tmp && hostname "$3" && shift 3 && exec "$@"' \
        sh "/etc/netns/pmxn$i/hosts" "$R/tmp/node$i" "node$i" "$@"
}

up_net() {
    mkdir -p "$R"
    ip link add $BR type bridge; ip addr add $HOSTIP/16 dev $BR; ip link set $BR up
    { echo "127.0.0.1 localhost"; echo "$HOSTIP $(hostname) pmxhost"
      for j in $(seq 1 "$N"); do echo "$(ip_of "$j") node$j"; done; } > "$R/hosts"
    for i in $(seq 1 "$N"); do
        ip netns add pmxn$i
        ip link add pmxv$i type veth peer name eth0 netns pmxn$i
        ip link set pmxv$i master $BR up
        ip -n pmxn$i addr add "$(ip_of "$i")/16" dev eth0
        ip -n pmxn$i link set eth0 up; ip -n pmxn$i link set lo up
        mkdir -p /etc/netns/pmxn$i; cp "$R/hosts" /etc/netns/pmxn$i/hosts
    done
}

up_ssh() {
    mkdir -p "$R/ssh" /run/sshd
    [ -f "$R/ssh/id" ] || ssh-keygen -q -t ed25519 -N '' -f "$R/ssh/id"
    cp "$R/ssh/id.pub" "$R/ssh/authorized_keys"
    { printf 'Host node* pmxhost\n  User root\n  IdentityFile %s/ssh/id\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n  BatchMode yes\n' "$R"
      for j in $(seq 1 "$N"); do printf 'Host node%s\n  HostName %s\n' "$j" "$(ip_of "$j")"; done; } > "$R/ssh/config"
    printf '#!/bin/sh\nexec ssh -F %s/ssh/config "$@"\n' "$R" > "$R/ssh/pssh"; chmod +x "$R/ssh/pssh"
    for i in $(seq 1 "$N"); do
        node_exec "$i" /usr/sbin/sshd -o PidFile="$R/sshd-node$i.pid" -o UsePAM=no \
            -o AuthorizedKeysFile="$R/ssh/authorized_keys" -o StrictModes=no
    done
}

up_slurm() {
    mkdir -p "$R/slurm/state" "$R/slurm/log" /run/munge; chown munge:munge /run/munge
    if ! munge -n >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
        pgrep -n -x munged > "$R/munged.pid"
    fi
    cat > "$R/slurm/slurm.conf" <<CONF
ClusterName=pmx
SlurmctldHost=$(hostname)($HOSTIP)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$R/slurm/state
SlurmdSpoolDir=$R/slurm/spool-%n
SlurmctldPidFile=$R/slurmctld.pid
SlurmdPidFile=$R/slurmd-%n.pid
SlurmctldLogFile=$R/slurm/log/slurmctld.log
SlurmdLogFile=$R/slurm/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SelectType=select/cons_tres
InactiveLimit=0
KillWait=5
CONF
    # slurmctld runs in the host's namespace and cannot read the nodes' /etc/hosts: give each
    # node's address. (Debian's build also has MULTIPLE_SLURMD=Yes, so several slurmd on one
    # host with Port= works too, but then all steps share /tmp and mpi/pmix fails, see above.)
    for j in $(seq 1 "$N"); do
        echo "NodeName=node$j NodeAddr=$(ip_of "$j") CPUs=2 RealMemory=1000 State=UNKNOWN"
    done >> "$R/slurm/slurm.conf"
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$R/slurm/slurm.conf"
    slurmctld -f "$R/slurm/slurm.conf"
    for i in $(seq 1 "$N"); do node_exec "$i" slurmd -f "$R/slurm/slurm.conf"; done
    echo "export SLURM_CONF=$R/slurm/slurm.conf"
}

down() {
    for f in "$R"/slurmd-*.pid "$R"/sshd-node*.pid "$R/slurmctld.pid" "$R/munged.pid"; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 2
    for l in $(ip -o link show | awk -F': ' '{print $2}' | grep '^pmxv' | cut -d@ -f1); do ip link del "$l"; done
    for n in $(ip netns list | awk '{print $1}' | grep '^pmxn'); do ip netns del "$n"; rm -rf "/etc/netns/$n"; done
    rmdir /etc/netns 2>/dev/null || true
    # `ip netns add` made /run/netns a mount point of its own; undo it when nothing is left
    if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then umount /run/netns 2>/dev/null || true; rmdir /run/netns; fi
    ip link show $BR >/dev/null 2>&1 && ip link del $BR
    rm -rf "$R"
}

case "${1:-}" in
    up) shift; up_net; for w in "$@"; do "up_$w"; done ;;
    exec) shift; node_exec "$@" ;;
    down) down ;;
    *) echo "usage: $0 up [ssh] [slurm] | exec I CMD... | down" >&2; exit 2 ;;
esac

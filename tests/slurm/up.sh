#!/usr/bin/env bash
# Start a throwaway single-node Slurm cluster (munge, slurmctld, slurmd) for the tests of the
# Slurm executor:  up.sh DIR CTLD_PORT SLURMD_PORT
# As root. Installs the Debian packages (slurmctld slurmd slurm-client munge) when missing,
# without starting their services. Everything lives under DIR (readable by the munge user);
# afterwards `source DIR/env.sh` sets SLURM_CONF, and down.sh DIR stops the daemons.
# Made for machines without systemd or cgroups: no process tracking beyond /proc, no
# accounting database (job states come from squeue and `scontrol show job`, kept an hour).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: up.sh DIR CTLD_PORT SLURMD_PORT" >&2; exit 2; }
dir=$1 ctld_port=$2 slurmd_port=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() {
    echo "up.sh: $*" >&2
    for log in "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/munge/munged.log"; do
        [ -s "$log" ] && { echo "--- $log" >&2; tail -n 8 "$log" >&2; }
    done
    "$here/down.sh" "$dir" >/dev/null 2>&1 || true
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root (the daemons run as root and munge)"

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    # a policy that forbids package scripts to start services: there is no init system
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    packages="slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends $packages >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 &&
          apt-get install -y -q --no-install-recommends $packages >/dev/null 2>&1; } ||
        { [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d; fail "apt-get install failed"; }
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/munge-socket"
chmod 755 "$dir"
host=$(hostname -s)

# munge: its own key, socket and files under DIR, run as the munge user
if [ -s /etc/munge/munge.key ]; then cp /etc/munge/munge.key "$dir/munge/munge.key"
else mungekey --create --keyfile="$dir/munge/munge.key"; fi
chown -R munge:munge "$dir/munge" "$dir/munge-socket"
chmod 700 "$dir/munge"               # the key: munge's alone
chmod 400 "$dir/munge/munge.key"
chmod 755 "$dir/munge-socket"        # the socket: every user's
socket=$dir/munge-socket/socket
runuser -u munge -- munged --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/seed" || fail "munged did not start"
for _ in $(seq 50); do
    munge -n -S "$socket" 2>/dev/null | unmunge -S "$socket" >/dev/null 2>&1 && break
    sleep 0.1
done
munge -n -S "$socket" | unmunge -S "$socket" >/dev/null 2>&1 || fail "munge does not answer"

hardware=$(slurmd -C | head -n 1)
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hardware")
memory=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hardware")
memory=$(( memory > 1024 ? memory - 512 : memory ))   # never "low memory" drained
cat > "$dir/slurm.conf" <<CONF
ClusterName=sumbench-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
MailProg=/bin/true
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$dir/slurm.conf
echo "export SLURM_CONF=$SLURM_CONF" > "$dir/env.sh"

slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
for _ in $(seq 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
scontrol ping 2>/dev/null | grep -q UP || fail "slurmctld does not answer"
slurmd -f "$SLURM_CONF" -N "$host" || fail "slurmd did not start"
for _ in $(seq 150); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1)
    case "$state" in
        idle) exit 0 ;;
        down*|drain*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
done
fail "node $host is not idle (state: ${state:-unknown})"

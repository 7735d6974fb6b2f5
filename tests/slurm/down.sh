#!/usr/bin/env bash
# Stop the cluster up.sh started under DIR:  down.sh DIR
# Cancels its jobs, then stops slurmd, slurmctld and munged by their PID files (no process
# is killed by name).
set -uo pipefail
dir=$1
export SLURM_CONF=$dir/slurm.conf
if [ -s "$dir/slurmctld.pid" ] && [ -f "$SLURM_CONF" ]; then
    jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    [ -n "${jobs// /}" ] && timeout 10 scancel $jobs 2>/dev/null
    for _ in $(seq 50); do   # until the job steps have reported back
        [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.2
    done
fi
# running: the process exists and is not a zombie (init may reap a daemon late)
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]; }
pids=()
for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(tr -dc 0-9 < "$pidfile")
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$pidfile"
done
for pid in "${pids[@]}"; do
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    running "$pid" && kill -KILL "$pid" 2>/dev/null
done
# job steps still finishing when slurmd stopped: those working in DIR
for proc in /proc/[0-9]*; do
    [ "$(cat "$proc/comm" 2>/dev/null)" = slurmstepd ] || continue
    case "$(readlink "$proc/cwd" 2>/dev/null)" in
        "$dir"|"$dir"/*) kill -KILL "${proc#/proc/}" 2>/dev/null ;;
    esac
done
exit 0

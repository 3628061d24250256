#!/usr/bin/env bash
# Start and stop the services the integration tests use, without systemd:
#   a single-node Slurm cluster (munge, slurmctld, slurmd) and a PostgreSQL server.
# Usage: bash .ci/services.sh start|stop ; `start` prints the environment to export.
set -euo pipefail

HOST=$(hostname -s)
PGVER=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
SLURM_STATE=/var/spool/slurmctld
SLURMD_SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm

start_munge() {
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  [ -s /etc/munge/munge.key ] || (mungekey --create --force 2>/dev/null || create-munge-key -f)
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
  chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
  pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
}

write_slurm_conf() {
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
  mkdir -p /etc/slurm "$SLURM_STATE" "$SLURMD_SPOOL" "$LOGS"
  cat > /etc/slurm/slurm.conf <<CONF
ClusterName=planner-ci
SlurmctldHost=${HOST}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${LOGS}/jobcomp.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=${SLURM_STATE}
SlurmdSpoolDir=${SLURMD_SPOOL}
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=${LOGS}/slurmctld.log
SlurmdLogFile=${LOGS}/slurmd.log
ReturnToService=2
MaxArraySize=10000
KillWait=5
NodeName=${HOST} CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
CONF
  : > /etc/slurm/cgroup.conf
}

start_slurm() {
  start_munge
  write_slurm_conf
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 1 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mixed|alloc'; then return 0; fi
    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  echo "slurm did not come up" >&2; sinfo >&2 || true; tail -20 "$LOGS"/slurmctld.log >&2 || true
  return 1
}

start_postgres() {
  [ -n "$PGVER" ] || { echo "PostgreSQL is not installed" >&2; return 1; }
  if ! pg_lsclusters -h 2>/dev/null | grep -q "^$PGVER main"; then pg_createcluster "$PGVER" main >/dev/null; fi
  pg_ctlcluster "$PGVER" main start 2>/dev/null || pg_ctlcluster "$PGVER" main status >/dev/null
  for _ in $(seq 1 30); do runuser -u postgres -- pg_isready -q && break; sleep 1; done
  runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_roles WHERE rolname='planner'" | grep -q 1 ||
    runuser -u postgres -- psql -qc "CREATE ROLE planner LOGIN PASSWORD 'planner'"
  runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_database WHERE datname='planner'" | grep -q 1 ||
    runuser -u postgres -- createdb -O planner planner
}

stop_all() {
  scancel --user=root >/dev/null 2>&1 || true
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  [ -n "$PGVER" ] && pg_ctlcluster "$PGVER" main stop >/dev/null 2>&1 || true
  pkill -x munged 2>/dev/null || true
}

case "${1:-}" in
  start)
    start_slurm >&2
    start_postgres >&2
    echo "export PLANNER_TEST_SLURM=1"
    echo "export PLANNER_TEST_POSTGRES=postgresql://planner:planner@localhost:5432/planner"
    ;;
  stop) stop_all ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

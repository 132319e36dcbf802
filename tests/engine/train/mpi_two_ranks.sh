# mpi_two_ranks.sh: sourced by the two-rank `ember train` tests, with their arguments
# EMBER_BINARY WORK_DIR. Sets $ember and an empty $work, lets Open MPI run as root, and
# defines mpirun_two_ranks: its arguments as two ranks on this machine (shared memory
# and loopback only, no ssh).
ember=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_two_ranks() {
    mpirun -np 2 --oversubscribe --mca btl self,vader --mca plm_rsh_agent "" "$@"
}

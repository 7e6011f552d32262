#!/bin/sh
# Prints what a process of a pmixrun job was told of its place, one line:
#   place rank=<PMIX_RANK> RANK=... LOCAL_RANK=... ... cpus=<Cpus_allowed_list>
# each variable's value, or "unset". Used by pmix-tests/tests/placement.rs.
line="place rank=${PMIX_RANK-unset}"
for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME \
    ROLE_RANK ROLE_WORLD_SIZE TORCHELASTIC_RUN_ID TORCHELASTIC_RESTART_COUNT \
    TORCHELASTIC_MAX_RESTARTS MASTER_ADDR MASTER_PORT \
    OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK \
    OMPI_COMM_WORLD_LOCAL_SIZE OMPI_COMM_WORLD_NODE_RANK OMPI_UNIVERSE_SIZE OMPI_WORLD_SIZE \
    OMPI_WORLD_LOCAL_SIZE; do
    eval "val=\${$v-unset}"
    line="$line $v=$val"
done
cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "$line cpus=$cpus"

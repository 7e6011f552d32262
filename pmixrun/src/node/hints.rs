//! Advice pmixrun adds to what its processes print, when a line says a mistake pmixrun can
//! name: MPICH refusing a PMIx launcher (a program whose MPI `--pmi auto` could not see, such
//! as one loaded from a place it does not look) gets the option that fixes it, once a run.

use std::io::Write;

use memchr::memmem;

/// What MPICH prints when the launcher offers PMIx and it was built for PMI-1 or PMI-2.
const MPICH_REFUSES_PMIX: &[u8] = b"unsupported PMI version PMIx";

/// The hints of one run, each given once.
#[derive(Default)]
pub(crate) struct Hints {
    pmi_given: bool,
}

impl Hints {
    /// Looks at one line rank `rank` wrote (after it was written; `stderr`: on its stderr);
    /// writes a hint to `err` if the line calls for one not given yet.
    pub(crate) fn look(&mut self, rank: u32, stderr: bool, bytes: &[u8], err: &mut dyn Write) {
        if self.pmi_given || !stderr {
            return;
        }
        if memmem::find(bytes, MPICH_REFUSES_PMIX).is_some() {
            self.pmi_given = true;
            let _ = writeln!(
                err,
                "pmixrun: rank {rank}'s MPI library is MPICH, which does not speak PMIx: run \
                 pmixrun with --pmi pmi1 (or pmi2)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpich_refusing_pmix_gets_the_option_once() {
        let mut h = Hints::default();
        let mut err = Vec::new();
        h.look(3, true, b"hello\n", &mut err);
        h.look(
            3,
            false,
            b"Runtime environment uses unsupported PMI version PMIx.\n",
            &mut err,
        );
        assert!(err.is_empty());
        let refusal = "check_MPIR_CVAR_PMI_VERSION(167):  Runtime environment uses \
                       unsupported PMI version PMIx. Aborting.\n";
        h.look(3, true, refusal.as_bytes(), &mut err);
        h.look(3, true, refusal.as_bytes(), &mut err);
        let said = String::from_utf8_lossy(&err);
        assert_eq!(said.matches("--pmi pmi1").count(), 1, "{said}");
        assert!(said.contains("rank 3"), "{said}");
    }
}

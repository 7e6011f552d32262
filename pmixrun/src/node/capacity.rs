//! How many processes this machine can run at once: the bound a spawn request is held to
//! before anything is set up for it.

use nix::sys::resource::{Resource, getrlimit};

/// The most processes this machine can run at once for this user: the least of the kernel's
/// `pid_max` and `threads-max` and the soft `RLIMIT_NPROC` (every process takes an id and a
/// thread, so no more than this can ever run). A request above it cannot be met whatever the
/// placement, and is refused before a byte is allocated per process.
pub(crate) fn max_procs() -> u64 {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let nproc = getrlimit(Resource::RLIMIT_NPROC).ok().map(|(soft, _)| soft);
    [
        read("/proc/sys/kernel/pid_max"),
        read("/proc/sys/kernel/threads-max"),
        nproc,
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(u64::MAX)
}

/// Checks a spawn's process count against `max` (the processes the run's machines can run)
/// before anything is allocated for it.
pub(crate) fn check_spawn(apps: &[pmix_server::App], max: u64) -> Result<(), String> {
    let asked: u64 = apps.iter().map(|a| u64::from(a.maxprocs)).sum();
    if asked > max {
        return Err(format!(
            "{asked} processes asked for, more than can run here at once ({max})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(n: u32) -> pmix_server::App {
        pmix_server::App {
            cmd: "/bin/true".into(),
            argv: vec!["/bin/true".into()],
            env: vec![],
            cwd: String::new(),
            maxprocs: n,
            info: vec![],
        }
    }

    #[test]
    fn counts_beyond_the_machine_are_refused_without_overflow() {
        let max = max_procs();
        assert!(max >= 1);
        assert!(check_spawn(&[app(1)], max).is_ok());
        assert!(check_spawn(&[app(4_000_000_000)], max).is_err());
        // Two counts whose sum does not fit in 32 bits.
        let e = check_spawn(&[app(u32::MAX), app(u32::MAX)], 100).unwrap_err();
        assert!(e.starts_with("8589934590 processes"), "{e}");
    }
}

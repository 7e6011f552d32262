//! What the benchmarks were run on: the machine, the versions compared, its load; printed
//! with every report (the single-node one and `--multinode`'s).

use std::process::Command;

use super::mpich::Mpich;

/// The output of `cmd` when it succeeds, trimmed.
pub(crate) fn first_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The machine and the versions compared; the MPICHs only if launch rows ran.
pub(crate) fn machine(launch: bool) -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU".to_owned(), |(_, m)| m.trim().to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or("?".to_owned(), |kb| format!("{:.0}", kb / 1024.0 / 1024.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let idle = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .unwrap_or_else(|_| "?".into());
    let lscpu = first_line(&mut Command::new("lscpu")).unwrap_or_default();
    let hypervisor = lscpu
        .lines()
        .find_map(|l| l.strip_prefix("Hypervisor vendor:"))
        .map_or(String::new(), |v| format!(" ({} guest)", v.trim()));
    let mut lines = vec![format!(
        "machine: {cpus} CPUs ({model}){hypervisor}, {mem_gib} GiB, Linux {}, cpuidle driver {}",
        kernel.trim(),
        idle.trim()
    )];
    if let Some(v) = super::build::openpmix_version() {
        lines.push(format!("reference: {v}, default MCA settings"));
    }
    if let Some(v) = first_line(Command::new("rustc").arg("-V")) {
        lines.push(format!(
            "ours: pmix-bench{} built by {v}, release profile",
            if launch { " and pmixrun" } else { "" }
        ));
    }
    if launch {
        for mpich in Mpich::ALL {
            if let Some(v) = super::build::mpich_version(mpich) {
                lines.push(format!(
                    "launch rows: {v}, with its Hydra and default settings"
                ));
            }
        }
    }
    lines
}

/// The load average (1, 5, 15 minutes) now: other work on the machine skews every number.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

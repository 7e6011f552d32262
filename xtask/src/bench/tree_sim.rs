//! `cargo xtask bench --tree-sim`: the daemon tree's fence beyond the machine, in simulation.
//!
//! No process and no socket: `pmix-tree`'s vertex cores over its simulated network in virtual
//! time (`pmix_tree::sim`), every link with the same delay. For each fan-out and tree size a
//! job-wide fence of the daemons (vertices `1..=N`; the root hosts no process, as in
//! pmixrun) is run to its end, and the table gives its length in link delays, the messages
//! it took, and how long the simulation took on this machine. Labelled as what it is: a
//! model of the protocol, not a measurement of a cluster.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use pmix_tree::core::Timing;
use pmix_tree::sim::Sim;
use pmix_tree::{FenceKey, Topology, Vertex};

const USAGE: &str = "\
usage: cargo xtask bench --tree-sim [--max N] [--out FILE]

Simulates a job-wide fence of N daemons (2, 4, ... up to --max, default 16384) under the
root, for fan-outs 2, 16 and 64, in virtual time with one link delay per hop, and prints a
Markdown table: tree depth, fence length in link delays (2·depth expected), messages, and
the wall time of the simulation. No process, no socket: pmix-tree's cores over its
simulated network.";

/// The fan-outs of the table.
const RADIXES: [u32; 3] = [2, 16, 64];

/// One virtual link delay.
const DELAY: Duration = Duration::from_millis(1);

/// Bytes each daemon contributes.
const CONTRIBUTION: usize = 16;

/// One row of the table.
struct Row {
    daemons: u32,
    radix: u32,
    depth: u32,
    delays: f64,
    messages: u64,
    wall: Duration,
}

/// Runs one fence of `daemons` daemons under a root with fan-out `radix`.
fn simulate(daemons: u32, radix: u32) -> Result<Row, String> {
    let topo = Topology::new(daemons + 1, radix);
    // Heartbeats that never come into play within the fence.
    let timing = Timing {
        heartbeat: Duration::from_secs(3600),
        dead_after: Duration::from_secs(4 * 3600),
    };
    let started = Instant::now();
    let mut sim = Sim::new(topo, timing, DELAY);
    let vertices: Vec<Vertex> = (1..=daemons).collect();
    let key = FenceKey {
        set: b"job".to_vec(),
        seq: 1,
    };
    for &v in &vertices {
        sim.fence(v, key.clone(), vertices.clone(), vec![0u8; CONTRIBUTION]);
    }
    if !sim.run_until_idle(Duration::from_secs(3600)) {
        return Err(format!(
            "{daemons} daemons, radix {radix}: the fence did not end"
        ));
    }
    let wall = started.elapsed();
    let done = sim.completions();
    if done.len() != vertices.len() || done.iter().any(|c| c.what.1.is_err()) {
        return Err(format!(
            "{daemons} daemons, radix {radix}: {} of {} completed, or with an error",
            done.len(),
            vertices.len()
        ));
    }
    let last = done.iter().map(|c| c.at).max().unwrap_or_default();
    Ok(Row {
        daemons,
        radix,
        depth: topo.depth(),
        delays: last.as_secs_f64() / DELAY.as_secs_f64(),
        messages: sim.delivered(),
        wall,
    })
}

/// Entry point of `cargo xtask bench --tree-sim`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let mut max: u32 = 16384;
    let mut out = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--max" => match it.next().and_then(|v| v.parse().ok()) {
                Some(n) if n >= 2 => max = n,
                _ => {
                    eprintln!("xtask bench --tree-sim: --max needs a number of at least 2");
                    return ExitCode::from(2);
                }
            },
            "--out" => match it.next() {
                Some(f) => out = Some(std::path::PathBuf::from(f)),
                None => {
                    eprintln!("xtask bench --tree-sim: --out needs a file");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("xtask bench --tree-sim: unknown argument {other:?}\n\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let mut md = String::from(
        "# The tree's fence in simulation\n\nA job-wide fence of N daemons under the root, \
         `pmix-tree`'s cores over its simulated network in virtual time, one delay per link; \
         no process, no socket (a model of the protocol, not a cluster). Length in link \
         delays, messages delivered, wall time of the simulation on this machine.\n\n\
         | daemons | radix | depth | fence (link delays) | messages | simulated in |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut n = 2;
    while n <= max {
        for radix in RADIXES {
            match simulate(n, radix) {
                Ok(r) => {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {:.0} | {} | {:.1} ms |",
                        r.daemons,
                        r.radix,
                        r.depth,
                        r.delays,
                        r.messages,
                        r.wall.as_secs_f64() * 1e3
                    );
                }
                Err(e) => {
                    eprintln!("xtask bench --tree-sim: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        n *= 2;
    }
    print!("{md}");
    if let Some(path) = out {
        if let Err(e) = std::fs::write(&path, &md) {
            eprintln!(
                "xtask bench --tree-sim: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

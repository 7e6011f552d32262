//! `cargo xtask conformance`: runs the conformance scenarios against our stack and prints a
//! matrix of scenario, result and time; exits non-zero when any scenario fails.
//!
//! Every scenario is a job of a scenario client of pmix-tests (`pmix-test-client`, or the
//! name-service, dynamic-process and group clients) under the launcher `pmixrun`, all built
//! first (dev profile, or release with `--release`). A row passes when the job's exit status,
//! its output and pmixrun's message are exactly what the scenario must produce; the negative rows (abort, exit without finalize, a hang killed by
//! `--timeout`) expect that very failure. Every job runs with pmixrun's `--timeout` and under
//! a deadline of the runner's own, past which pmixrun and its job are killed and the row
//! fails with "timed out". The rows are data, in `conformance/scenarios.rs`.

mod exec;
mod scenarios;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use scenarios::{ONE_NODE, Plan, SCENARIOS, Scenario};

const USAGE: &str = "\
usage: cargo xtask conformance [--filter SUBSTR]... [--release] [--list] [--nodes N]

Runs the conformance scenarios (shared/research/tests.md: make-check rows 00-13 and the C
rows, as far as implemented) as pmixrun jobs of pmix-tests' scenario clients, and prints a
matrix: tests.md ids, scenario, result and time on one node, and result and time across N
logical nodes (`pmixrun --launcher local --host node1,...,nodeN --map-by node`: daemons of a
multi-node run on this machine, ranks dealt one per node in turn). Exits 1 when a scenario
fails, 2 on a usage or build error. Scenarios of features not implemented yet are listed as
skipped.

options:
    --filter SUBSTR   only scenarios whose name or id contains SUBSTR (repeatable: any)
    --nodes N         the multi-node column's number of logical nodes (default 3; 0: no
                      multi-node column)
    --release         build and run the release binaries instead of the dev ones
    --list            list the scenarios and their command lines; run nothing
    -h, --help        this text";

/// What the command line asks for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    filters: Vec<String>,
    release: bool,
    list: bool,
    /// Logical nodes of the multi-node column; 0 for none.
    nodes: u32,
}

/// Default number of logical nodes of the multi-node column.
const NODES: u32 = 3;

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut opts = Options {
        nodes: NODES,
        ..Options::default()
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--release" => opts.release = true,
            "--list" => opts.list = true,
            "--nodes" => {
                let value = args.next().ok_or("--nodes needs a value")?;
                opts.nodes = value
                    .parse()
                    .map_err(|_| format!("--nodes {value:?}: not a number"))?;
            }
            "--filter" => {
                let value = args.next().ok_or("--filter needs a value")?;
                opts.filters.push(value.clone());
            }
            other => match other.strip_prefix("--filter=") {
                Some(value) => opts.filters.push(value.to_owned()),
                None => return Err(format!("unknown argument {other:?}")),
            },
        }
    }
    Ok(Some(opts))
}

impl Scenario {
    fn matches(&self, filters: &[String]) -> bool {
        filters.is_empty()
            || filters.iter().any(|f| {
                let f = f.to_lowercase();
                self.name.contains(&f) || self.ids.iter().any(|id| id.to_lowercase().contains(&f))
            })
    }

    fn ids(&self) -> String {
        self.ids.join(",")
    }
}

/// Entry point of `cargo xtask conformance`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let opts = match parse(args) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("xtask conformance: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let chosen: Vec<&Scenario> = SCENARIOS
        .iter()
        .filter(|s| s.matches(&opts.filters))
        .collect();
    if chosen.is_empty() {
        eprintln!("xtask conformance: no scenario matches {:?}", opts.filters);
        return ExitCode::from(2);
    }
    let root = crate::workspace_root();
    let started = Instant::now();
    let bins = match exec::build(&root, opts.release) {
        Ok(bins) => bins,
        Err(e) => {
            eprintln!("xtask conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if opts.list {
        list(&chosen, &bins);
        return ExitCode::SUCCESS;
    }
    let built = started.elapsed();
    let nodes = Some(opts.nodes).filter(|n| *n > 0);
    if run_all(&chosen, &bins, built, nodes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn list(chosen: &[&Scenario], bins: &exec::Bins) {
    for s in chosen {
        println!("{:<8} {:<27} {}", s.ids(), s.name, s.about);
        match &s.plan {
            Plan::Run(job) => println!(
                "         $ {}",
                exec::shell_line(&exec::command_line(bins, job, None))
            ),
            Plan::Skip(why) => println!("         skipped: {why}"),
        }
    }
}

/// Runs the scenarios one after the other (on one node, then across `nodes` logical nodes),
/// printing each row when it is done, then the details of the failures and a summary. True
/// when none failed.
fn run_all(chosen: &[&Scenario], bins: &exec::Bins, built: Duration, nodes: Option<u32>) -> bool {
    let started = Instant::now();
    let multi = nodes.map(|n| format!("{n} NODES")).unwrap_or_default();
    println!(
        "{:<8} {:<27} {:<6} {:>6}  {multi:<13}  NOTE",
        "TESTS.MD", "SCENARIO", "RESULT", "TIME"
    );
    let (mut passed, mut skipped) = (0, 0);
    let mut failures = Vec::new();
    for s in chosen {
        let job = match &s.plan {
            Plan::Skip(why) => {
                println!(
                    "{:<8} {:<27} {:<6} {:>6}  {:<13}  {why}",
                    s.ids(),
                    s.name,
                    "skip",
                    "-",
                    if nodes.is_some() { "skip" } else { "" }
                );
                skipped += 1;
                continue;
            }
            Plan::Run(job) => job,
        };
        let mut cells = Vec::new();
        let mut notes = Vec::new();
        let one_node = ONE_NODE
            .iter()
            .find(|(n, _)| *n == s.name)
            .map(|(_, why)| *why);
        if let (Some(why), Some(_)) = (one_node, nodes) {
            notes.push(why.to_owned());
        }
        let multi = nodes.filter(|_| one_node.is_none());
        for n in std::iter::once(None).chain(multi.map(Some)) {
            let argv = exec::command_line(bins, job, n);
            let deadline = Duration::from_secs(job.timeout_s) + exec::DEADLINE_MARGIN;
            let (problems, outcome) = match exec::run(&argv, deadline) {
                Ok(outcome) => (exec::judge(job, &outcome), Some(outcome)),
                Err(e) => (vec![e], None),
            };
            let time = outcome.as_ref().map_or("-".to_owned(), |o| {
                format!("{:.2}s", o.elapsed.as_secs_f64())
            });
            if problems.is_empty() {
                cells.push(("pass", time));
                passed += 1;
            } else {
                cells.push(("FAIL", time));
                notes.push(problems[0].clone());
                failures.push((s, argv, problems, outcome));
            }
        }
        let multi = match (cells.get(1), nodes) {
            (Some((r, t)), _) => format!("{r:<6} {t:>6}"),
            (None, Some(_)) => "skip".to_owned(),
            (None, None) => String::new(),
        };
        println!(
            "{:<8} {:<27} {:<6} {:>6}  {multi:<13}  {}",
            s.ids(),
            s.name,
            cells[0].0,
            cells[0].1,
            notes.join("; ")
        );
    }
    for (s, argv, problems, outcome) in &failures {
        println!("\n---- {} ({}): {}", s.name, s.ids(), s.about);
        println!("$ {}", exec::shell_line(argv));
        for p in problems {
            println!("  - {p}");
        }
        if let Some(o) = outcome {
            show("stdout", &o.stdout);
            show("stderr", &o.stderr);
        }
    }
    println!(
        "\n{passed} passed, {} failed, {skipped} skipped in {:.1}s (build {:.1}s)",
        failures.len(),
        started.elapsed().as_secs_f64(),
        built.as_secs_f64()
    );
    failures.is_empty()
}

/// Prints the last lines of a captured stream.
fn show(name: &str, text: &str) {
    const LAST: usize = 40;
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        println!("  {name}: (empty)");
        return;
    }
    let skip = lines.len().saturating_sub(LAST);
    if skip > 0 {
        println!("  {name} (last {LAST} of {} lines):", lines.len());
    } else {
        println!("  {name}:");
    }
    for line in &lines[skip..] {
        println!("    | {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn command_line() {
        assert_eq!(
            parse(&[]),
            Ok(Some(Options {
                nodes: NODES,
                ..Options::default()
            }))
        );
        assert_eq!(
            parse(&args(&[
                "--filter",
                "fence",
                "--release",
                "--filter=C0",
                "--list",
                "--nodes",
                "0"
            ])),
            Ok(Some(Options {
                filters: args(&["fence", "C0"]),
                release: true,
                list: true,
                nodes: 0,
            }))
        );
        assert!(parse(&args(&["--nodes", "x"])).is_err());
        assert_eq!(parse(&args(&["--release", "--help"])), Ok(None));
        assert!(parse(&args(&["--filter"])).is_err());
        assert!(parse(&args(&["fence"])).is_err());
    }

    #[test]
    fn the_table_is_consistent() {
        for (name, _) in ONE_NODE {
            assert!(
                SCENARIOS.iter().any(|s| s.name == *name),
                "ONE_NODE names {name}, which is no scenario"
            );
        }
        let mut names = HashSet::new();
        for s in SCENARIOS {
            assert!(names.insert(s.name), "{} twice", s.name);
            assert!(!s.ids.is_empty(), "{}: no ids", s.name);
            for id in s.ids {
                let known = *id == "-"
                    || (id.len() == 2 && id.bytes().all(|b| b.is_ascii_digit()))
                    || (id.len() == 3 && id.starts_with('C'));
                assert!(known, "{}: id {id:?}", s.name);
            }
            if let Plan::Run(job) = &s.plan {
                assert!(!job.apps.is_empty(), "{}: no app", s.name);
                assert!(job.apps.iter().all(|a| a.np > 0), "{}: -n 0", s.name);
                assert!(job.timeout_s > 0, "{}: --timeout 0", s.name);
            }
        }
    }

    #[test]
    fn filters_match_names_and_ids() {
        let s = SCENARIOS
            .iter()
            .find(|s| s.name == "replace-keys")
            .expect("row");
        assert!(s.matches(&[]));
        assert!(s.matches(&args(&["replace"])));
        assert!(s.matches(&args(&["c07"])));
        assert!(s.matches(&args(&["nope", "12"])));
        assert!(!s.matches(&args(&["fence"])));
    }
}

//! The report as a whole: the tables, the goals judged on this run, the notes and failures,
//! and for `--out` the machine and the command it ran on.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use super::goals::{judge, libpmix_goals};
use super::measured::Measured;
use super::plan::launch_rows;
use super::rows::{libpmix_rows, rows};
use super::tables::{capi_table, floor_table, libpmix_table, main_table};
use crate::bench::machine::{first_line, machine};
use crate::bench::{Options, launch};

/// The report as printed, and as written by `--out`.
pub(crate) struct Text {
    pub(crate) terminal: String,
    pub(crate) markdown: String,
}

/// Everything the report is made of.
pub(crate) struct Context<'a> {
    pub(crate) opts: &'a Options,
    pub(crate) measured: &'a Measured,
    pub(crate) notes: &'a [String],
    pub(crate) failures: &'a [String],
    pub(crate) elapsed: Duration,
    /// The load average at the start and at the end.
    pub(crate) load: [String; 2],
    pub(crate) args: &'a [String],
}

/// The report: the tables, the goals judged on them, the notes and the failures; for `--out`,
/// headed by the date, the command and the machine.
pub(crate) fn render(cx: &Context<'_>) -> Text {
    let (opts, m, notes, failures, args) = (cx.opts, cx.measured, cx.notes, cx.failures, cx.args);
    let elapsed = cx.elapsed;
    let rows = rows(opts);
    let table = main_table(m, &rows);
    let floor = floor_table(opts, m, &rows);
    let libpmix = libpmix_rows(opts);
    let libpmix_text = libpmix_table(m, &libpmix) + &capi_table(m, &libpmix);
    let launches = launch_rows(opts);
    let launch = launch::table(opts, m, &launches);
    let mut goals = String::new();
    let _ = writeln!(goals, "| goal | target | worst ratio (where) | verdict |");
    let _ = writeln!(goals, "| --- | --- | --- | --- |");
    let mut verdicts = judge(m, &rows);
    verdicts.extend(libpmix_goals(m, &libpmix));
    verdicts.extend(launch::goals(m, &launches));
    for [name, target, worst, verdict] in verdicts {
        let _ = writeln!(goals, "| {name} | {target} | {worst} | {verdict} |");
    }
    let mut tail = String::new();
    if !notes.is_empty() {
        let _ = writeln!(tail, "\nNotes:");
        for n in notes {
            let _ = writeln!(tail, "- {n}");
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(tail, "\nFAILURES:");
        for f in failures {
            let _ = writeln!(tail, "- {f}");
        }
    }
    let secs = elapsed.as_secs();
    let took = format!("{} min {:02} s", secs / 60, secs % 60);
    let command = std::iter::once("cargo xtask bench".to_owned())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let load = format!(
        "load average (1/5/15 min) at the start {}, at the end {}",
        cx.load[0], cx.load[1]
    );
    let terminal = format!(
        "\n{table}{floor}{libpmix_text}{launch}\nGoals, judged on this run:\n\n{goals}{tail}\nrun time: {took}; {load}\n"
    );
    let date = first_line(Command::new("date").args(["-u", "+%Y-%m-%d"])).unwrap_or_default();
    let mut head = format!("- date: {date}\n- command: `{command}` (run time {took})\n");
    for line in machine(!launches.is_empty()) {
        let _ = writeln!(head, "- {line}");
    }
    let _ = writeln!(head, "- {load}");
    let markdown = format!(
        "{head}\n{table}{floor}{libpmix_text}{launch}\nGoals, judged on this run:\n\n{goals}{tail}"
    );
    Text { terminal, markdown }
}

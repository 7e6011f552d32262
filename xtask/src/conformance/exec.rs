//! Building the binaries, running one job under a deadline, and judging its outcome.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::scenarios::{Job, NS, Stderr, Stdout};

/// How long after pmixrun's own `--timeout` the runner gives up on pmixrun itself.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(10);

/// After a SIGTERM at the deadline, how long pmixrun gets to stop its job (its own grace
/// period before SIGKILL is 2 s).
const TERM_GRACE: Duration = Duration::from_secs(4);

/// How long to wait for the rest of the output once pmixrun has ended (it waits at most 2 s
/// for its processes' output itself).
const OUTPUT_WAIT: Duration = Duration::from_secs(5);

/// The programs the scenarios run.
pub(crate) struct Bins {
    /// The launcher.
    pub(crate) pmixrun: PathBuf,
    /// The scenario client.
    pub(crate) client: PathBuf,
    /// Where the binaries are.
    pub(crate) dir: PathBuf,
}

/// Builds pmixrun and the pmix-tests clients in the chosen profile and finds them.
pub(crate) fn build(root: &Path, release: bool) -> Result<Bins, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root).args([
        "build",
        "--quiet",
        "-p",
        "pmixrun",
        "-p",
        "pmix-tests",
        "--bins",
    ]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build failed ({status})"));
    }
    let profile = target_dir(&cargo, root)?.join(if release { "release" } else { "debug" });
    let bins = Bins {
        pmixrun: profile.join("pmixrun"),
        client: profile.join(super::scenarios::TEST_CLIENT),
        dir: profile.clone(),
    };
    let names = profile.join(super::scenarios::NAMES_CLIENT);
    let dynamic = profile.join(super::scenarios::DYN_CLIENT);
    let group = profile.join(super::scenarios::GROUP_CLIENT);
    for bin in [&bins.pmixrun, &bins.client, &names, &dynamic, &group] {
        if !bin.is_file() {
            return Err(format!("{} is missing after the build", bin.display()));
        }
    }
    Ok(bins)
}

/// The workspace's target directory, as `cargo metadata` reports it (it honours
/// `CARGO_TARGET_DIR` and the configuration files).
fn target_dir(cargo: &std::ffi::OsStr, root: &Path) -> Result<PathBuf, String> {
    let out = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed ({})", out.status));
    }
    let json = String::from_utf8_lossy(&out.stdout);
    json_string_field(&json, "target_directory")
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata did not name the target directory".to_owned())
}

/// The value of the first `"field":"..."` in `json`, unescaped. Enough for cargo metadata's
/// top-level path fields; not a JSON parser.
fn json_string_field(json: &str, field: &str) -> Option<String> {
    let start = json.find(&format!("\"{field}\":\""))? + field.len() + 4;
    let mut out = String::new();
    let mut chars = json[start..].chars();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
}

/// The pmixrun command line of `job`, program first.
pub(crate) fn command_line(bins: &Bins, job: &Job, nodes: Option<u32>) -> Vec<String> {
    let mut argv = vec![
        bins.pmixrun.display().to_string(),
        "--timeout".to_owned(),
        job.timeout_s.to_string(),
    ];
    if let Some(n) = nodes {
        // Logical nodes on this machine, one rank on each in turn: every collective and every
        // peer's data crosses the tree.
        let hosts: Vec<String> = (1..=n).map(|i| format!("node{i}")).collect();
        argv.extend([
            "--launcher".to_owned(),
            "local".to_owned(),
            "--host".to_owned(),
            hosts.join(","),
            "--map-by".to_owned(),
            "node".to_owned(),
            "--oversubscribe".to_owned(),
        ]);
    }
    for (i, app) in job.apps.iter().enumerate() {
        if i > 0 {
            argv.push(":".to_owned());
        }
        argv.extend(["-n".to_owned(), app.np.to_string()]);
        let client = bins.dir.join(app.bin).display().to_string();
        if app.args.iter().any(|a| a.contains(NS)) {
            // `exec` keeps the pid pmixrun started, so it still supervises the client itself.
            argv.extend([
                "sh".to_owned(),
                "-c".to_owned(),
                sh_script(app.args),
                client.clone(),
            ]);
        } else {
            argv.push(client.clone());
            argv.extend(app.args.iter().map(|a| (*a).to_owned()));
        }
    }
    argv
}

/// `argv` as one line a POSIX shell reads back as the same words, for showing commands.
pub(crate) fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// One word for a POSIX shell: as it is when nothing in it is special, else quoted.
fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-+=/.,:@%".contains(c);
    if word.is_empty() {
        "\"\"".to_owned()
    } else if word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `exec "$0" arg...` with [`NS`] replaced by the namespace pmixrun put in the environment.
fn sh_script(args: &[&str]) -> String {
    let mut script = "exec \"$0\"".to_owned();
    for arg in args {
        let pieces: Vec<String> = arg
            .split(NS)
            .map(|p| {
                if p.is_empty() {
                    String::new()
                } else {
                    quote(p)
                }
            })
            .collect();
        let word = pieces.join("\"$PMIX_NAMESPACE\"");
        script.push(' ');
        script.push_str(if word.is_empty() { "\"\"" } else { &word });
    }
    script
}

/// What one run of pmixrun did.
pub(crate) struct Outcome {
    /// Its exit status; `None` when it was killed at the deadline.
    pub(crate) status: Option<ExitStatus>,
    /// The deadline it ran under.
    pub(crate) deadline: Duration,
    /// Wall-clock time from start to end.
    pub(crate) elapsed: Duration,
    /// Everything the job wrote to stdout (pmixrun forwards its processes' output).
    pub(crate) stdout: String,
    /// Everything written to stderr.
    pub(crate) stderr: String,
}

/// Runs `argv` (pmixrun and its arguments) in a process group of its own, and waits for it at
/// most `deadline`; past it, stops pmixrun and its job and returns with `status: None`.
pub(crate) fn run(argv: &[String], deadline: Duration) -> Result<Outcome, String> {
    let (program, args) = argv.split_first().ok_or("empty command line")?;
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let pid = child.id();
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match exited.recv_timeout(deadline) {
        Ok(status) => Some(status.map_err(|e| format!("waiting for pmixrun: {e}"))?),
        Err(_) => {
            stop(pid, &exited);
            None
        }
    };
    let elapsed = started.elapsed();
    let text = |rx: mpsc::Receiver<String>| rx.recv_timeout(OUTPUT_WAIT).unwrap_or_default();
    Ok(Outcome {
        status,
        deadline,
        elapsed,
        stdout: text(stdout),
        stderr: text(stderr),
    })
}

/// Reads a pipe to its end on a thread of its own.
fn collect(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// Stops a pmixrun that overran its deadline, and its job. pmixrun starts every process in
/// a process group of its own, so killing pmixrun's group is not enough: the job's groups
/// are found first, from pmixrun's children. SIGTERM lets pmixrun stop the job itself (it
/// passes the signal on); whatever is left after a grace period gets SIGKILL.
fn stop(pid: u32, exited: &mpsc::Receiver<std::io::Result<ExitStatus>>) {
    let mut groups = vec![format!("-{pid}")];
    groups.extend(children(pid).into_iter().map(|c| format!("-{c}")));
    signal("TERM", &groups[..1]);
    if exited.recv_timeout(TERM_GRACE).is_err() {
        signal("KILL", &groups);
        let _ = exited.recv_timeout(TERM_GRACE);
    } else {
        // pmixrun ended; a process of its job that outlived it would be an orphan.
        signal("KILL", &groups[1..]);
    }
}

/// The pids of `pid`'s children, from `/proc` (Linux).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Sends `sig` to each target (`-pgid` for a group) with the shell's `kill`: the standard
/// library cannot signal a process group, and xtask keeps to it. Targets already gone are
/// ignored.
fn signal(sig: &str, targets: &[String]) {
    if targets.is_empty() {
        return;
    }
    let _ = Command::new("sh")
        .args(["-c", "kill -s \"$0\" -- \"$@\" 2>/dev/null", sig])
        .args(targets)
        .stdin(Stdio::null())
        .status();
}

/// Why `outcome` is not what `job` must produce; empty for a pass.
pub(crate) fn judge(job: &Job, outcome: &Outcome) -> Vec<String> {
    let expect = &job.expect;
    let size = job.apps.iter().map(|a| a.np).sum();
    let mut problems = Vec::new();
    let code = match outcome.status {
        None => {
            problems.push(format!("timed out after {}s", outcome.deadline.as_secs()));
            return problems;
        }
        Some(status) => status.code(),
    };
    if code != Some(expect.status) {
        let got = match code {
            Some(c) => format!("exit status {c}"),
            None => format!("pmixrun ended by {:?}", outcome.status),
        };
        let hint = if code == Some(124) && expect.status != 124 {
            format!(
                " (the job hung: pmixrun --timeout {} s expired)",
                job.timeout_s
            )
        } else {
            String::new()
        };
        problems.push(format!("{got}, expected {}{hint}", expect.status));
    }
    if let Some(why) = stdout_mismatch(&expect.stdout, size, &outcome.stdout) {
        problems.push(why);
    }
    if let Some(why) = stderr_mismatch(&expect.stderr, size, &outcome.stderr) {
        problems.push(why);
    }
    problems
}

/// Compares stderr with what `want` asks for.
fn stderr_mismatch(want: &Stderr, size: u32, stderr: &str) -> Option<String> {
    match want {
        Stderr::Exactly("") if !stderr.is_empty() => Some("unexpected output on stderr".to_owned()),
        Stderr::Exactly(text) if stderr != *text => Some(format!("stderr is not {text:?}")),
        Stderr::Exactly(_) => None,
        Stderr::PerRankContaining(pattern) => {
            let mut lines: Vec<&str> = stderr.lines().collect();
            for rank in 0..size {
                let fragment = pattern.replace("{rank}", &rank.to_string());
                match lines.iter().position(|l| l.contains(&fragment)) {
                    Some(i) => {
                        lines.swap_remove(i);
                    }
                    None => return Some(format!("no line on stderr contains {fragment:?}")),
                }
            }
            (!lines.is_empty()).then(|| format!("{} unexpected lines on stderr", lines.len()))
        }
    }
}

/// Compares stdout's lines, as a multiset, with what `want` asks for.
fn stdout_mismatch(want: &Stdout, size: u32, stdout: &str) -> Option<String> {
    let mut expected: Vec<String> = match want {
        Stdout::Unchecked => return None,
        Stdout::Lines(lines) => lines.iter().map(|l| (*l).to_owned()).collect(),
        Stdout::Passed { per_rank, lines } => {
            let mut all: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            for rank in 0..size {
                all.push("ok".to_owned());
                all.extend(per_rank.iter().map(|l| {
                    l.replace("{rank}", &rank.to_string())
                        .replace("{size}", &size.to_string())
                }));
            }
            all
        }
    };
    let mut got: Vec<&str> = stdout.lines().collect();
    expected.sort_unstable();
    got.sort_unstable();
    if got == expected {
        return None;
    }
    let failed = got.iter().filter(|l| l.starts_with("FAILED")).count();
    let oks = got.iter().filter(|l| **l == "ok").count();
    Some(if matches!(want, Stdout::Passed { .. }) && failed > 0 {
        format!("{failed} of {size} ranks failed their checks ({oks} ok)")
    } else {
        format!(
            "stdout has {} lines, not the {} expected",
            got.len(),
            expected.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_placeholder_becomes_a_shell_expansion() {
        assert_eq!(
            sh_script(&["fence", "{ns}:0-2", "", "it's", "{ns}"]),
            r#"exec "$0" fence "$PMIX_NAMESPACE":0-2 "" 'it'\''s' "$PMIX_NAMESPACE""#
        );
        // `exec printf '[%s]' ...` shows each word the client would receive.
        let out = Command::new("sh")
            .args([
                "-c",
                &sh_script(&["[%s]", "{ns}:0-2", "", "it's"]),
                "printf",
            ])
            .env("PMIX_NAMESPACE", "j o$b")
            .output()
            .expect("sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "[j o$b:0-2][][it's]");
    }

    #[test]
    fn commands_are_shown_as_the_shell_would_read_them() {
        let argv = ["/p/run", "-n", "2", "sh", "-c", "exec \"$0\" 'a b'", ""].map(String::from);
        let line = shell_line(&argv);
        assert_eq!(line, r#"/p/run -n 2 sh -c 'exec "$0" '\''a b'\''' """#);
        let out = Command::new("sh")
            .args(["-c", &format!("printf '[%s]' {line}")])
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            r#"[/p/run][-n][2][sh][-c][exec "$0" 'a b'][]"#
        );
    }

    #[test]
    fn string_fields_of_cargo_metadata() {
        let json = r#"{"packages":[],"target_directory":"/a \"b\"\\c\u00e9","version":1}"#;
        assert_eq!(
            json_string_field(json, "target_directory").as_deref(),
            Some("/a \"b\"\\cé")
        );
        assert_eq!(json_string_field(json, "workspace_root"), None);
    }

    #[test]
    fn stdout_is_compared_as_a_multiset_of_lines() {
        let want = Stdout::Passed {
            per_rank: &["rank {rank} of {size}"],
            lines: &["once"],
        };
        let good = "rank 1 of 2\nok\nonce\nrank 0 of 2\nok\n";
        assert_eq!(stdout_mismatch(&want, 2, good), None);
        let missing = "rank 1 of 2\nok\nonce\nrank 0 of 2\n";
        assert!(stdout_mismatch(&want, 2, missing).is_some());
        let failed = "rank 1 of 2\nok\nonce\nFAILED: x\n";
        assert_eq!(
            stdout_mismatch(&want, 2, failed).as_deref(),
            Some("1 of 2 ranks failed their checks (1 ok)")
        );
        assert_eq!(stdout_mismatch(&Stdout::Unchecked, 2, "x"), None);
        let lines = Stdout::Lines(&["ready", "ready"]);
        assert_eq!(stdout_mismatch(&lines, 2, "ready\nready\n"), None);
        assert!(stdout_mismatch(&lines, 2, "ready\n").is_some());
    }

    #[test]
    fn stderr_exactly_or_one_matching_line_per_rank() {
        assert_eq!(stderr_mismatch(&Stderr::Exactly(""), 2, ""), None);
        assert!(stderr_mismatch(&Stderr::Exactly(""), 2, "x\n").is_some());
        assert_eq!(stderr_mismatch(&Stderr::Exactly("a\n"), 2, "a\n"), None);
        assert!(stderr_mismatch(&Stderr::Exactly("a\n"), 2, "a").is_some());
        let per_rank = Stderr::PerRankContaining(":{rank} is gone");
        assert_eq!(
            stderr_mismatch(&per_rank, 2, "t1 j:1 is gone x\nt2 j:0 is gone y\n"),
            None
        );
        assert!(stderr_mismatch(&per_rank, 2, "j:1 is gone\nj:1 is gone\n").is_some());
        assert!(stderr_mismatch(&per_rank, 2, "j:0 is gone\nj:1 is gone\nmore\n").is_some());
    }
}

//! The PMI-2 `spawn` command: one frame holding every command of an `MPI_Comm_spawn_multiple`.
//!
//! `ncmds` and the preput pairs (`preputcount`, `ppkey<i>`, `ppval<i>`) come first, then per
//! command `subcmd` (the program), `maxprocs`, `argc`, `argv<i>` (the arguments after the
//! program, from 0), `infokeycount`, `infokey<i>`, `infoval<i>`. The per-command keys repeat,
//! so the pairs are read in order, each `subcmd` starting the next command.

use pmix_types::{Info, Key, Value};
use pmix_wire::App;

use super::wire::Command;

/// The most commands, arguments, preput or info pairs a spawn may carry.
const MAX_ITEMS: usize = 4096;

/// The job info (the preput pairs, which the host makes job-level data of the new job, read
/// by the children's `kvs-get`) and the apps.
pub(crate) fn parse(c: &Command) -> Result<(Vec<Info>, Vec<App>), String> {
    let ncmds = count(c.get("ncmds"), "ncmds")?;
    let npreput = match c.get("preputcount") {
        Some(v) => count(Some(v), "preputcount")?,
        None => 0,
    };
    if ncmds == 0 {
        return Err("a spawn of no command".into());
    }
    let mut preput: Vec<(Option<String>, Option<String>)> = vec![(None, None); npreput];
    let mut apps: Vec<Pending> = Vec::new();
    for (k, v) in &c.pairs {
        if let Some(i) = index(k, "ppkey") {
            slot(&mut preput, i, k)?.0 = Some(v.clone());
            continue;
        }
        if let Some(i) = index(k, "ppval") {
            slot(&mut preput, i, k)?.1 = Some(v.clone());
            continue;
        }
        if k == "subcmd" {
            if apps.len() == ncmds {
                return Err(format!("more than ncmds={ncmds} commands"));
            }
            if v.is_empty() {
                return Err("a command without a program".into());
            }
            apps.push(Pending::new(v));
            continue;
        }
        let Some(app) = apps.last_mut() else {
            continue; // ncmds, preputcount, thrid, or a key this server does not know
        };
        match k.as_str() {
            "maxprocs" => app.maxprocs = Some(number(v, k)?),
            "argc" => app.args = vec![None; count(Some(v), k)?],
            "infokeycount" => app.info = vec![(None, None); count(Some(v), k)?],
            _ => {
                if let Some(i) = index(k, "argv") {
                    *slot(&mut app.args, i, k)? = Some(v.clone());
                } else if let Some(i) = index(k, "infokey") {
                    slot(&mut app.info, i, k)?.0 = Some(v.clone());
                } else if let Some(i) = index(k, "infoval") {
                    slot(&mut app.info, i, k)?.1 = Some(v.clone());
                }
            }
        }
    }
    if apps.len() != ncmds {
        return Err(format!("ncmds={ncmds} but {} commands", apps.len()));
    }
    let mut info = Vec::new();
    for (i, pair) in preput.into_iter().enumerate() {
        let (Some(k), Some(v)) = pair else {
            return Err(format!("preput pair {i} incomplete"));
        };
        let key = Key::new(&k).map_err(|_| format!("preput key {k:?} is not a valid key"))?;
        info.push(Info::new(key, Value::String(v)));
    }
    let apps = apps
        .into_iter()
        .map(Pending::finish)
        .collect::<Result<_, _>>()?;
    Ok((info, apps))
}

/// One command while its pairs arrive.
struct Pending {
    program: String,
    maxprocs: Option<u32>,
    args: Vec<Option<String>>,
    info: Vec<(Option<String>, Option<String>)>,
}

impl Pending {
    fn new(program: &str) -> Self {
        Pending {
            program: program.to_owned(),
            maxprocs: None,
            args: Vec::new(),
            info: Vec::new(),
        }
    }

    fn finish(self) -> Result<App, String> {
        let maxprocs = self
            .maxprocs
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("command {} without maxprocs", self.program))?;
        let mut argv = vec![self.program.clone()];
        for (i, a) in self.args.into_iter().enumerate() {
            argv.push(a.ok_or_else(|| format!("command {} without argv{i}", self.program))?);
        }
        let mut cwd = String::new();
        for (i, pair) in self.info.into_iter().enumerate() {
            let (Some(k), Some(v)) = pair else {
                return Err(format!("info pair {i} of {} incomplete", self.program));
            };
            match k.as_str() {
                "wdir" => cwd = v,
                // One launcher's placement hints: where the processes go is pmixrun's choice.
                "path" | "host" | "hosts" | "hostfile" => {}
                other => tracing::debug!(key = other, "PMI-2 spawn info key ignored"),
            }
        }
        Ok(App {
            cmd: self.program,
            argv,
            env: vec![],
            cwd,
            maxprocs,
            info: vec![],
        })
    }
}

/// `<prefix><n>` gives `n`.
fn index(key: &str, prefix: &str) -> Option<usize> {
    let n = key.strip_prefix(prefix)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

fn slot<'a, T>(v: &'a mut [T], i: usize, key: &str) -> Result<&'a mut T, String> {
    v.get_mut(i)
        .ok_or_else(|| format!("{key} beyond the count announced"))
}

fn number(v: &str, key: &str) -> Result<u32, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{key}={v:?} is not a number"))
}

fn count(v: Option<&str>, key: &str) -> Result<usize, String> {
    let n = number(v.ok_or_else(|| format!("a spawn without {key}"))?, key)? as usize;
    if n > MAX_ITEMS {
        return Err(format!("{key}={n} is more than {MAX_ITEMS}"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cmd(pairs: &[(&str, &str)]) -> Command {
        Command {
            cmd: "spawn".into(),
            pairs: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn two_commands_with_their_own_arguments_and_info() {
        let c = cmd(&[
            ("ncmds", "2"),
            ("preputcount", "1"),
            ("ppkey0", "PARENT_ROOT_PORT_NAME"),
            ("ppval0", "tag#0$a;b$"),
            ("subcmd", "/bin/a"),
            ("maxprocs", "1"),
            ("argc", "2"),
            ("argv0", "x y"),
            ("argv1", "k=v"),
            ("infokeycount", "1"),
            ("infokey0", "wdir"),
            ("infoval0", "/tmp"),
            ("subcmd", "/bin/b"),
            ("maxprocs", "2"),
            ("argc", "0"),
            ("infokeycount", "0"),
        ]);
        let (info, apps) = parse(&c).unwrap();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].key.as_str(), "PARENT_ROOT_PORT_NAME");
        assert_eq!(info[0].value, Value::String("tag#0$a;b$".into()));
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0].argv, ["/bin/a", "x y", "k=v"]);
        assert_eq!(apps[0].cwd, "/tmp");
        assert_eq!(apps[0].maxprocs, 1);
        assert_eq!(apps[1].argv, ["/bin/b"]);
        assert_eq!(apps[1].maxprocs, 2);
        assert_eq!(apps[1].cwd, "");
    }

    #[test]
    fn inconsistent_spawns_are_refused_with_a_reason() {
        let bad = [
            cmd(&[("ncmds", "2"), ("subcmd", "/a"), ("maxprocs", "1")]),
            cmd(&[("ncmds", "1"), ("subcmd", "/a")]),
            cmd(&[
                ("ncmds", "1"),
                ("subcmd", "/a"),
                ("maxprocs", "1"),
                ("argc", "1"),
            ]),
            cmd(&[
                ("ncmds", "1"),
                ("subcmd", "/a"),
                ("maxprocs", "1"),
                ("argv3", "x"),
            ]),
            cmd(&[
                ("ncmds", "1"),
                ("preputcount", "1"),
                ("subcmd", "/a"),
                ("maxprocs", "1"),
            ]),
            cmd(&[("ncmds", "99999"), ("subcmd", "/a"), ("maxprocs", "1")]),
            cmd(&[("subcmd", "/a"), ("maxprocs", "1")]),
        ];
        for c in bad {
            assert!(parse(&c).is_err(), "{c:?}");
        }
    }
}

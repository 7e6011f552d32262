//! Where a run's processes go: its nodes (`--host`, `--hostfile`, or this machine alone) and
//! the node of every rank (`--map-by`, `--oversubscribe`), for the first job and for the jobs
//! its processes spawn. Pure logic, no I/O but the reading of a hostfile.
//!
//! # The rules
//!
//! - **Nodes.** `--host a,b:2,node[1-4]:2`: each item a name or `name:slots` (one slot when
//!   not given), the name possibly in Slurm's bracket syntax, which stands for every name it
//!   expands to with those slots. `--hostfile FILE`: one `name [slots=N] [max_slots=M]` per
//!   line (one slot when not given), `#` starts a comment. A name given twice is one node with
//!   the slots of both (`a,a,b` is `a:2,b:1`, as in Open MPI), in the order of its first
//!   appearance. Without either, the run has one node, this machine, without a slot limit.
//! - **`--map-by slot`** (the default): each node in turn takes as many consecutive ranks as
//!   it has slots (so does `--map-by core|package|numa`, which places ranks within a node:
//!   `binding.rs`). **`--map-by node`**: one rank per node in turn, skipping full nodes. Ranks
//!   are consecutive across application contexts, so the second one continues where the
//!   first left off.
//! - **More ranks than slots** is refused, unless `--oversubscribe`. Then the ranks beyond
//!   the slots wrap around: with `--map-by slot`, as if every node had its slots again (a
//!   second pass over the nodes, then a third...), so that every node gets about the same
//!   number of ranks per slot, each node's ranks still consecutive; with `--map-by node`,
//!   one rank per node in turn again from the first node. A node never gets more than its
//!   `max_slots`; when every node is at it, the job is refused.
//! - **Spawned jobs** ([`Placement::spawn`]) fill the slots the running jobs leave free, in
//!   node order (as `--map-by slot` would), whatever the run's `--map-by`. When there are not
//!   enough, the spawn is refused unless `--oversubscribe`, and then the rest wraps as
//!   `--map-by slot` does, never above a node's `max_slots`. A spawn's own directives
//!   ([`SpawnRules`], read by `spawn_placement.rs`) narrow each application context to the
//!   nodes it names (`PMIX_HOST`, `PMIX_HOSTFILE`) and choose the mapping over them
//!   (`PMIX_MAPBY`): `node`, one rank per node in turn, skipping full nodes, as `--map-by node`;
//!   `ppr:N:node`, at most `N` of the job's ranks per node, each node filled in turn; and
//!   whether the free slots may be exceeded (`:OVERSUBSCRIBE`, `:NOOVERSUBSCRIBE`).

#![cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the multi-node launch, not wired yet, is what calls most of this"
    )
)]

use std::collections::HashMap;
use std::path::Path;

use pmix_regex::hostlist;

use crate::cli::{self, Launcher, MapBy};
use crate::plan::layout::Layout;

/// One node of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// Its name: what the launch agent is given, and what the node map says.
    pub(crate) name: String,
    /// How many processes it takes before it is oversubscribed.
    pub(crate) slots: u32,
    /// How many processes it takes even with `--oversubscribe` (hostfile `max_slots`).
    pub(crate) max_slots: Option<u32>,
}

/// The run's nodes, in order: node `i` is the `i`-th name of `--host` or the hostfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeList {
    /// The nodes, no name twice.
    pub(crate) nodes: Vec<Node>,
}

/// Whether `name` is acceptable as a node's name: a hostname's letters, digits, `-`, `.`
/// and `_`, at most 255 bytes. No spaces, `:`, `,` or brackets, which the maps and the
/// command lines that carry names cannot hold.
fn check_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {name:?} is not a valid host name"))
    }
}

/// Expands a name possibly in Slurm's bracket syntax, refusing what no host name holds.
fn expand(names: &str, what: &str) -> Result<Vec<String>, String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-._[],".contains(&b);
    if let Some(c) = names.chars().find(|c| !u8::try_from(*c).is_ok_and(allowed)) {
        return Err(format!(
            "{what}: {names:?} is not a valid host name ({c:?} in it)"
        ));
    }
    hostlist::expand(names).map_err(|e| format!("{what}: {e}"))
}

/// A count of slots, at least 1.
fn parse_slots(text: &str, what: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "{what}: {text:?} is not a number of slots (1 or more)"
        )),
    }
}

/// Collects nodes, merging a name given again into its first appearance.
#[derive(Default)]
struct Builder {
    nodes: Vec<Node>,
    index: HashMap<String, usize>,
}

impl Builder {
    /// Adds `slots` (and sets `max_slots` if given) to the node `name`, new or not.
    fn add(
        &mut self,
        name: String,
        slots: u32,
        max_slots: Option<u32>,
        what: &str,
    ) -> Result<(), String> {
        check_name(&name, what)?;
        match self.index.get(&name) {
            Some(&i) => {
                let node = &mut self.nodes[i];
                node.slots = node
                    .slots
                    .checked_add(slots)
                    .ok_or_else(|| format!("{what}: too many slots on {name}"))?;
                if max_slots.is_some() {
                    node.max_slots = max_slots;
                }
            }
            None => {
                self.index.insert(name.clone(), self.nodes.len());
                self.nodes.push(Node {
                    name,
                    slots,
                    max_slots,
                });
            }
        }
        Ok(())
    }

    fn finish(self, what: &str) -> Result<NodeList, String> {
        if self.nodes.is_empty() {
            return Err(format!("{what}: no hosts"));
        }
        if let Some(n) = self
            .nodes
            .iter()
            .find(|n| n.max_slots.is_some_and(|m| m < n.slots))
        {
            return Err(format!(
                "{what}: {} has max_slots below its {} slots",
                n.name, n.slots
            ));
        }
        Ok(NodeList { nodes: self.nodes })
    }
}

/// Splits a `--host` value at the commas outside brackets.
fn split_items(list: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items
}

impl NodeList {
    /// The run's nodes when no host list is given: this machine, without a slot limit.
    pub(crate) fn this_machine(hostname: &str) -> NodeList {
        NodeList {
            nodes: vec![Node {
                name: hostname.to_owned(),
                slots: u32::MAX,
                max_slots: None,
            }],
        }
    }

    /// The nodes the command line names (`--host`, `--hostfile`, read now), or `None` when it
    /// names none and the run is on this machine alone, as before pmixrun was multi-node.
    pub(crate) fn from_options(opts: &cli::Nodes) -> Result<Option<NodeList>, String> {
        if let Some(file) = &opts.hostfile {
            return NodeList::read_hostfile(file).map(Some);
        }
        if opts.hosts.is_empty() {
            return Ok(None);
        }
        NodeList::parse_hosts(&opts.hosts).map(Some)
    }

    /// The nodes of the Slurm allocation pmixrun runs in, if it runs in one: the names of
    /// `SLURM_JOB_NODELIST` (Slurm's bracket syntax), each with the slots
    /// `SLURM_TASKS_PER_NODE` gives it (such as `2(x3),1`).
    pub(crate) fn from_allocation() -> Result<Option<NodeList>, String> {
        let (Ok(list), Ok(tasks)) = (
            std::env::var("SLURM_JOB_NODELIST"),
            std::env::var("SLURM_TASKS_PER_NODE"),
        ) else {
            return Ok(None);
        };
        NodeList::from_slurm(&list, &tasks).map(Some)
    }

    /// The nodes of an allocation described as Slurm does (see [`NodeList::from_allocation`]).
    pub(crate) fn from_slurm(list: &str, tasks: &str) -> Result<NodeList, String> {
        let what = "the Slurm allocation";
        let names =
            hostlist::expand(list).map_err(|e| format!("SLURM_JOB_NODELIST {list:?}: {e}"))?;
        let slots = hostlist::tasks_per_node(tasks)
            .map_err(|e| format!("SLURM_TASKS_PER_NODE {tasks:?}: {e}"))?;
        if names.len() != slots.len() {
            return Err(format!(
                "{what}: {} nodes in SLURM_JOB_NODELIST but {} in SLURM_TASKS_PER_NODE",
                names.len(),
                slots.len()
            ));
        }
        let mut b = Builder::default();
        for (name, n) in names.into_iter().zip(slots) {
            b.add(name, n, None, what)?;
        }
        Ok(NodeList { nodes: b.nodes })
    }

    /// Reads a hostfile (see [`NodeList::parse_hostfile`]).
    pub(crate) fn read_hostfile(file: &Path) -> Result<NodeList, String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read the hostfile {}: {e}", file.display()))?;
        NodeList::parse_hostfile(&text, &file.display().to_string())
    }

    /// Parses `--host` values (each a comma-separated list of `name` or `name:slots`, the
    /// name possibly a hostlist expression such as `node[1-4]`).
    pub(crate) fn parse_hosts(lists: &[String]) -> Result<NodeList, String> {
        let mut b = Builder::default();
        for list in lists {
            for item in split_items(list) {
                let what = format!("--host {item:?}");
                let end_of_brackets = item.rfind(']').map_or(0, |i| i + 1);
                let (names, slots) = match item[end_of_brackets..].find(':') {
                    Some(i) => {
                        let colon = end_of_brackets + i;
                        (&item[..colon], parse_slots(&item[colon + 1..], &what)?)
                    }
                    None => (item, 1),
                };
                if names.is_empty() {
                    return Err(format!("--host {list:?}: an empty host name"));
                }
                let expanded = expand(names, &what)?;
                for name in expanded {
                    b.add(name, slots, None, &what)?;
                }
            }
        }
        b.finish("--host")
    }

    /// Parses a hostfile's text: lines `name`, `name slots=N`, `name slots=N max_slots=M`
    /// (`max-slots` too), blank lines and `#` comments. `file` names it in errors.
    pub(crate) fn parse_hostfile(text: &str, file: &str) -> Result<NodeList, String> {
        let mut b = Builder::default();
        for (n, line) in (1..).zip(text.lines()) {
            let line = line.split('#').next().unwrap_or_default();
            let mut words = line.split_whitespace();
            let Some(names) = words.next() else { continue };
            let what = format!("{file}, line {n}");
            let mut slots = None;
            let mut max_slots = None;
            for word in words {
                let (slot, value) = match word.split_once('=') {
                    Some(("slots", v)) => (&mut slots, v),
                    Some(("max_slots" | "max-slots", v)) => (&mut max_slots, v),
                    _ => {
                        return Err(format!(
                            "{what}: {word:?} is not understood \
                             (lines are `name [slots=N] [max_slots=M]`)"
                        ));
                    }
                };
                if slot.is_some() {
                    return Err(format!("{what}: {word:?} is given twice"));
                }
                *slot = Some(parse_slots(value, &what)?);
            }
            let expanded = expand(names, &what)?;
            for name in expanded {
                b.add(name, slots.unwrap_or(1), max_slots, &what)?;
            }
        }
        b.finish(&format!("hostfile {file}"))
    }

    /// How many nodes.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes' names, in order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.name.as_str())
    }

    /// The slots of every node together.
    pub(crate) fn total_slots(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.slots)).sum()
    }

    /// Whether every node is this machine (see [`is_this_machine`]).
    pub(crate) fn all_on(&self, this_host: &str) -> bool {
        self.names().all(|n| is_this_machine(n, this_host))
    }

    /// "3 slots on 2 hosts", for messages.
    fn describe_slots(&self) -> String {
        let hosts = match self.len() {
            1 => "1 host".to_owned(),
            n => format!("{n} hosts"),
        };
        format!("{} slots on {hosts}", self.total_slots())
    }

    /// Most processes each node may take with `--oversubscribe`.
    fn room(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .map(|n| n.max_slots.map_or(u64::MAX, u64::from))
            .collect()
    }
}

/// Whether a node named `name` is this machine, whose hostname is `this_host`: `localhost`,
/// the hostname, or the same name with or without its domain.
pub(crate) fn is_this_machine(name: &str, this_host: &str) -> bool {
    let short = |s: &'_ str| s.split('.').next().unwrap_or_default().to_owned();
    name == "localhost"
        || name == this_host
        || (short(name) == short(this_host) && (!name.contains('.') || !this_host.contains('.')))
}

/// The launcher of a run on `nodes`: the one asked for, else `local` when every node is this
/// machine and `ssh` when one is not.
pub(crate) fn launcher(opts: &cli::Nodes, nodes: &NodeList, this_host: &str) -> Launcher {
    opts.launcher.unwrap_or(if nodes.all_on(this_host) {
        Launcher::Local
    } else {
        Launcher::Ssh
    })
}

/// The node of every rank of a job, and the ranks of every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The node (index into the run's [`NodeList`]) of each rank.
    pub(crate) node_of: Vec<usize>,
    /// For each node of the run, its ranks in ascending order (none for a node left unused).
    pub(crate) ranks: Vec<Vec<u32>>,
}

/// How many processes of its own each node runs: the slots taken, for placing spawned jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlotUsage(Vec<u64>);

impl SlotUsage {
    /// Nothing running on any of `nodes`.
    pub(crate) fn new(nodes: &NodeList) -> SlotUsage {
        SlotUsage(vec![0; nodes.len()])
    }

    /// A job placed as `p` started.
    pub(crate) fn add(&mut self, p: &Placement) {
        for (used, ranks) in self.0.iter_mut().zip(&p.ranks) {
            *used = used.saturating_add(ranks.len() as u64);
        }
    }

    /// A job placed as `p` ended.
    pub(crate) fn remove(&mut self, p: &Placement) {
        for (used, ranks) in self.0.iter_mut().zip(&p.ranks) {
            *used = used.saturating_sub(ranks.len() as u64);
        }
    }

    /// The processes running on node `node`.
    pub(crate) fn on(&self, node: usize) -> u64 {
        self.0.get(node).copied().unwrap_or(0)
    }
}

/// How many of `n` ranks each node takes: first up to `first[i]` on each node in order, then
/// (only if `wrap`) passes of up to `per_pass[i]` on each node again, never more than
/// `room[i]` on a node. `None` if they do not fit.
fn slot_counts(
    first: &[u64],
    per_pass: &[u64],
    room: &[u64],
    n: u64,
    wrap: bool,
) -> Option<Vec<u64>> {
    let mut counts = vec![0u64; first.len()];
    let mut left = n;
    for ((c, f), r) in counts.iter_mut().zip(first).zip(room) {
        let take = (*f).min(*r).min(left);
        *c = take;
        left -= take;
    }
    while left > 0 {
        if !wrap {
            return None;
        }
        let pass: Vec<u64> = per_pass
            .iter()
            .zip(room)
            .zip(&counts)
            .map(|((p, r), c)| (*p).min(r - c))
            .collect();
        let whole: u64 = pass.iter().fold(0u64, |a, p| a.saturating_add(*p));
        if whole == 0 {
            return None;
        }
        if left >= whole {
            // As many whole passes as fit before a node's room gets below its pass: each
            // round of this loop changes a node's pass or ends it, so it runs O(nodes) times.
            let fits = pass
                .iter()
                .zip(room)
                .zip(&counts)
                .filter(|((p, _), _)| **p > 0)
                .map(|((p, r), c)| (r - c) / p)
                .min()
                .unwrap_or(1);
            let k = (left / whole).min(fits).max(1);
            for (c, p) in counts.iter_mut().zip(&pass) {
                *c += k * p;
            }
            left -= k * whole;
        } else {
            for (c, p) in counts.iter_mut().zip(&pass) {
                let take = (*p).min(left);
                *c += take;
                left -= take;
            }
        }
    }
    Some(counts)
}

/// How a spawn's ranks go to the nodes ([`Placement::spawn`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SpawnMap {
    /// The free slots in node order (`PMIX_MAPBY` `slot`, or an object within the nodes).
    #[default]
    Slot,
    /// One rank per node in turn (`node`).
    Node,
    /// At most this many of the job's ranks on each node (`ppr:N:node`).
    PerNode(u32),
}

/// A spawn's placement directives, as the nodes of the run see them (`spawn_placement.rs`
/// reads them from the request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SpawnRules {
    /// For each application context, the nodes it may use (indices into the run's
    /// [`NodeList`], ascending), or `None` for any.
    pub(crate) hosts: Vec<Option<Vec<usize>>>,
    /// How ranks go to those nodes.
    pub(crate) map: SpawnMap,
    /// The spawn's own say on exceeding the free slots, over the run's `--oversubscribe`.
    pub(crate) oversubscribe: Option<bool>,
}

/// What the nodes run while a spawned job is placed: the running jobs' processes and those
/// of the new job placed so far, both included in `run`.
struct Taken {
    run: Vec<u64>,
    job: Vec<u64>,
}

impl Taken {
    /// Places `n` more ranks of the job on the nodes `hosts` (indices, ascending) as `map`
    /// says, counting them as taken: the node of each, in rank order.
    fn place(
        &mut self,
        nodes: &NodeList,
        hosts: &[usize],
        n: u64,
        map: SpawnMap,
        over: bool,
    ) -> Result<Vec<usize>, String> {
        let slots: Vec<u64> = hosts
            .iter()
            .map(|&i| u64::from(nodes.nodes[i].slots))
            .collect();
        let free: Vec<u64> = (hosts.iter().zip(&slots))
            .map(|(&i, s)| s.saturating_sub(self.run[i]))
            .collect();
        let room: Vec<u64> = hosts
            .iter()
            .map(|&i| {
                let max = nodes.nodes[i].max_slots.map_or(u64::MAX, u64::from);
                max.saturating_sub(self.run[i])
            })
            .collect();
        let sum = |v: &[u64]| v.iter().fold(0u64, |a, x| a.saturating_add(*x));
        let size = u32::try_from(n).unwrap_or(u32::MAX);
        let at: Option<Vec<usize>> = match map {
            SpawnMap::Slot => slot_counts(&free, &slots, &room, n, over)
                .map(|counts| Placement::consecutive(&counts, size).node_of),
            SpawnMap::Node => (n <= sum(if over { &room } else { &free }))
                .then(|| Placement::by_node(&free, if over { &room } else { &free }, size).node_of),
            SpawnMap::PerNode(per) => {
                let cap: Vec<u64> = (hosts.iter().zip(free.iter().zip(&room)))
                    .map(|(&i, (f, r))| {
                        let left = u64::from(per).saturating_sub(self.job[i]);
                        left.min(if over { *r } else { *f })
                    })
                    .collect();
                slot_counts(&cap, &cap, &cap, n, false)
                    .map(|counts| Placement::consecutive(&counts, size).node_of)
            }
        };
        let Some(at) = at else {
            let procs = if n == 1 { "process" } else { "processes" };
            let hosts_slots = NodeList {
                nodes: hosts.iter().map(|&i| nodes.nodes[i].clone()).collect(),
            }
            .describe_slots();
            return Err(match map {
                SpawnMap::PerNode(per) => format!(
                    "no room for {n} more {procs}: PMIX_MAPBY ppr:{per}:node places at most \
                     {per} per host, on {}{}",
                    if hosts.len() == 1 {
                        "1 host".to_owned()
                    } else {
                        format!("{} hosts", hosts.len())
                    },
                    if over {
                        String::new()
                    } else {
                        format!(" within their free slots ({} of {hosts_slots})", sum(&free))
                    }
                ),
                _ if !over => format!(
                    "no room for {n} more {procs}: {} of the {hosts_slots} are free \
                     (pmixrun was started without --oversubscribe)",
                    sum(&free),
                ),
                _ => format!("no room for {n} more {procs}: every host is at its max_slots"),
            });
        };
        let at: Vec<usize> = at.into_iter().map(|k| hosts[k]).collect();
        for &i in &at {
            self.run[i] += 1;
            self.job[i] += 1;
        }
        Ok(at)
    }
}

impl Placement {
    /// Places a job of `layout.size` ranks on `nodes` (see the module docs for the rules).
    pub(crate) fn map(
        nodes: &NodeList,
        layout: &Layout,
        map_by: MapBy,
        oversubscribe: bool,
    ) -> Result<Placement, String> {
        let n = u64::from(layout.size);
        if !oversubscribe && n > nodes.total_slots() {
            return Err(format!(
                "{n} processes but only {}: use --oversubscribe or more hosts",
                nodes.describe_slots()
            ));
        }
        let slots: Vec<u64> = nodes.nodes.iter().map(|n| u64::from(n.slots)).collect();
        let room = nodes.room();
        let placement = match map_by {
            // Mapping to objects is within a node (`binding.rs`); across nodes it is by slot.
            MapBy::Slot | MapBy::Core | MapBy::Package | MapBy::Numa => {
                { slot_counts(&slots, &slots, &room, n, oversubscribe) }
                    .map(|counts| Placement::consecutive(&counts, layout.size))
            }
            // One per node in turn fills the same nodes as slot filling, only in another
            // order: it fits when the room of every node together holds the job.
            MapBy::Node => (n <= room.iter().fold(0u64, |a, r| a.saturating_add(*r)))
                .then(|| Placement::by_node(&slots, &room, layout.size)),
        };
        placement.ok_or_else(|| {
            format!(
                "{n} processes do not fit: every host is at its max_slots ({} in all)",
                room.iter().fold(0u64, |a, r| a.saturating_add(*r))
            )
        })
    }

    /// Places a spawned job of `layout.size` ranks on the slots of `nodes` that `usage` leaves
    /// free, as its `rules` say (by default in node order); beyond them, only with
    /// `oversubscribe` (see the module docs). Consecutive application contexts allowed the
    /// same nodes are placed together, as one. The error is a message for the spawning
    /// process, whose spawn fails with it (`PMIX_ERR_OUT_OF_RESOURCE` is the fitting status).
    pub(crate) fn spawn(
        nodes: &NodeList,
        usage: &SlotUsage,
        layout: &Layout,
        oversubscribe: bool,
        rules: &SpawnRules,
    ) -> Result<Placement, String> {
        let over = rules.oversubscribe.unwrap_or(oversubscribe);
        let all: Vec<usize> = (0..nodes.len()).collect();
        let hosts_of = |a: usize| {
            rules
                .hosts
                .get(a)
                .and_then(Option::as_deref)
                .unwrap_or(&all)
        };
        let mut taken = Taken {
            run: (0..nodes.len()).map(|i| usage.on(i)).collect(),
            job: vec![0; nodes.len()],
        };
        let mut node_of = Vec::with_capacity(layout.size as usize);
        let apps = layout.firsts.len();
        let mut a = 0;
        while a < apps {
            let mut b = a + 1;
            while b < apps && hosts_of(b) == hosts_of(a) {
                b += 1;
            }
            let end = layout.firsts.get(b).copied().unwrap_or(layout.size);
            let n = u64::from(end.saturating_sub(layout.firsts[a]));
            let got = taken.place(nodes, hosts_of(a), n, rules.map, over)?;
            node_of.extend(got);
            a = b;
        }
        Ok(Placement::from_node_of(node_of, nodes.len()))
    }

    /// The placement whose rank `r` is on node `node_of[r]`, of `nodes` nodes.
    fn from_node_of(node_of: Vec<usize>, nodes: usize) -> Placement {
        let mut ranks = vec![Vec::new(); nodes];
        for (rank, &node) in (0u32..).zip(&node_of) {
            ranks[node].push(rank);
        }
        Placement { node_of, ranks }
    }

    /// Node `i` takes `counts[i]` consecutive ranks, in node order.
    fn consecutive(counts: &[u64], size: u32) -> Placement {
        let mut node_of = Vec::with_capacity(size as usize);
        let mut ranks = Vec::with_capacity(counts.len());
        let mut next = 0u32;
        for (i, c) in counts.iter().enumerate() {
            let end = next
                .saturating_add(u32::try_from(*c).unwrap_or(u32::MAX))
                .min(size);
            ranks.push((next..end).collect());
            node_of.extend(std::iter::repeat_n(i, (end - next) as usize));
            next = end;
        }
        Placement { node_of, ranks }
    }

    /// One rank per node in turn up to their slots, then (the caller checked they fit) one per
    /// node in turn again from the first, up to their `room`.
    fn by_node(slots: &[u64], room: &[u64], size: u32) -> Placement {
        let mut counts = vec![0u64; slots.len()];
        let mut node_of = Vec::with_capacity(size as usize);
        let mut ranks = vec![Vec::new(); slots.len()];
        let mut rank = 0u32;
        for limit in [slots, room] {
            let mut active: Vec<usize> =
                (0..slots.len()).filter(|&i| counts[i] < limit[i]).collect();
            let mut pos = 0;
            while rank < size && !active.is_empty() {
                let node = active[pos];
                node_of.push(node);
                ranks[node].push(rank);
                counts[node] += 1;
                rank += 1;
                if counts[node] >= limit[node] {
                    active.remove(pos);
                } else {
                    pos += 1;
                }
                if pos >= active.len() {
                    pos = 0;
                }
            }
        }
        Placement { node_of, ranks }
    }

    /// The nodes (indices into the run's [`NodeList`]) with at least one rank, in order.
    pub(crate) fn used(&self) -> Vec<usize> {
        (0..self.ranks.len())
            .filter(|&i| !self.ranks[i].is_empty())
            .collect()
    }

    /// The node of `rank`, if the job has it.
    pub(crate) fn node_of(&self, rank: u32) -> Option<usize> {
        self.node_of.get(rank as usize).copied()
    }

    /// The ranks on node `node`, ascending.
    pub(crate) fn ranks_on(&self, node: usize) -> &[u32] {
        self.ranks.get(node).map_or(&[], Vec::as_slice)
    }

    /// What the job's node and process maps say: the nodes used and their ranks.
    pub(crate) fn job_map(&self, nodes: &NodeList) -> JobMap {
        let used = self.used();
        JobMap {
            names: used.iter().map(|&i| nodes.nodes[i].name.clone()).collect(),
            ranks: used.iter().map(|&i| self.ranks[i].clone()).collect(),
        }
    }
}

/// A job's nodes and its ranks on each, as its node map (`PMIX_NODE_MAP`) and process map
/// (`PMIX_PROC_MAP`) describe them: only nodes with ranks, in the run's node order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobMap {
    /// The names of the job's nodes.
    pub(crate) names: Vec<String>,
    /// The ranks on each of them, ascending; never empty.
    pub(crate) ranks: Vec<Vec<u32>>,
}

impl JobMap {
    /// A job of `size` ranks all on the node `name`.
    pub(crate) fn one_node(name: &str, size: u32) -> JobMap {
        JobMap {
            names: vec![name.to_owned()],
            ranks: vec![(0..size).collect()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_allocation_gives_its_nodes_and_slots() {
        let nodes =
            NodeList::from_slurm("node[1-3],gpu7", "2(x3),1").unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<(&str, u32)> = nodes
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.slots))
            .collect();
        assert_eq!(got, [("node1", 2), ("node2", 2), ("node3", 2), ("gpu7", 1)]);
        assert!(NodeList::from_slurm("node[1-3]", "2(x2)").is_err());
        assert!(NodeList::from_slurm("node[1-", "1").is_err());
    }

    fn hosts(list: &str) -> Result<NodeList, String> {
        NodeList::parse_hosts(&[list.to_owned()])
    }

    fn node(name: &str, slots: u32, max_slots: Option<u32>) -> Node {
        Node {
            name: name.into(),
            slots,
            max_slots,
        }
    }

    fn layout(sizes: &[u32]) -> Layout {
        let mut firsts = Vec::new();
        let mut size = 0;
        for s in sizes {
            firsts.push(size);
            size += s;
        }
        Layout { firsts, size }
    }

    /// The node of every rank, by name.
    fn names_of(nodes: &NodeList, p: &Placement) -> String {
        p.node_of
            .iter()
            .map(|&i| nodes.nodes[i].name.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn place(list: &str, sizes: &[u32], map_by: MapBy, over: bool) -> Result<String, String> {
        let nodes = hosts(list)?;
        let p = Placement::map(&nodes, &layout(sizes), map_by, over)?;
        check_consistent(&p, sizes.iter().sum());
        Ok(names_of(&nodes, &p))
    }

    /// `node_of` and `ranks` say the same, every rank once.
    fn check_consistent(p: &Placement, size: u32) {
        assert_eq!(p.node_of.len(), size as usize);
        for (node, ranks) in p.ranks.iter().enumerate() {
            assert!(ranks.is_sorted(), "{ranks:?}");
            for &r in ranks {
                assert_eq!(p.node_of(r), Some(node));
            }
        }
        assert_eq!(p.ranks.iter().map(Vec::len).sum::<usize>(), size as usize);
    }

    #[test]
    fn host_lists_merge_repeated_names_and_expand_brackets() {
        let l = hosts("a,a,b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.nodes, [node("a", 2, None), node("b", 1, None)]);
        let l = NodeList::parse_hosts(&["n[1-3]:2,x:4,n2".into(), "y,n[1,3]:1".into()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            l.nodes,
            [
                node("n1", 3, None),
                node("n2", 3, None),
                node("n3", 3, None),
                node("x", 4, None),
                node("y", 1, None),
            ]
        );
        assert_eq!(l.total_slots(), 14);
        assert_eq!(l.names().collect::<Vec<_>>(), ["n1", "n2", "n3", "x", "y"]);
        let l = hosts("node01.cluster.org:3").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.nodes, [node("node01.cluster.org", 3, None)]);
    }

    #[test]
    fn bad_host_lists_are_refused_with_the_item() {
        for (bad, says) in [
            ("", "empty host name"),
            ("a,,b", "empty host name"),
            ("a:0", "\"0\" is not a number of slots"),
            ("a:x", "\"x\" is not a number of slots"),
            ("a:", "not a number of slots"),
            ("a:2:3", "not a number of slots"),
            ("a b", "not a valid host name"),
            ("a[1-2", "--host \"a[1-2\""),
            ("a/b", "not a valid host name"),
            (":3", "empty host name"),
            ("a:4294967295,a", "too many slots on a"),
        ] {
            match hosts(bad) {
                Ok(l) => panic!("{bad:?} gave {l:?}"),
                Err(e) => assert!(e.contains(says), "{bad:?}: {e}"),
            }
        }
    }

    #[test]
    fn hostfiles_read_slots_comments_and_blank_lines() {
        let text = "# the cluster\n\
                    \n\
                    a slots=4   # the big one\n\
                    b\n\
                    \tc slots=2 max_slots=3\n\
                    d max-slots=2\n\
                    e[1-2] slots=1\n\
                    a slots=1\n";
        let l = NodeList::parse_hostfile(text, "hf").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            l.nodes,
            [
                node("a", 5, None),
                node("b", 1, None),
                node("c", 2, Some(3)),
                node("d", 1, Some(2)),
                node("e1", 1, None),
                node("e2", 1, None),
            ]
        );
    }

    #[test]
    fn bad_hostfile_lines_are_named() {
        for (bad, says) in [
            ("a\nb cpus=2\n", "hf, line 2: \"cpus=2\" is not understood"),
            (
                "a slots=2 slots=3",
                "hf, line 1: \"slots=3\" is given twice",
            ),
            ("a slots", "hf, line 1: \"slots\" is not understood"),
            (
                "\n\na slots=-1",
                "hf, line 3: \"-1\" is not a number of slots",
            ),
            ("a slots=4 max_slots=2", "a has max_slots below its 4 slots"),
            ("a:2", "hf, line 1: \"a:2\" is not a valid host name"),
            ("# nothing\n\n", "hostfile hf: no hosts"),
        ] {
            match NodeList::parse_hostfile(bad, "hf") {
                Ok(l) => panic!("{bad:?} gave {l:?}"),
                Err(e) => assert!(e.contains(says), "{bad:?}: {e}"),
            }
        }
    }

    #[test]
    fn options_name_the_nodes_or_leave_this_machine() {
        let mut o = cli::Nodes::default();
        assert_eq!(NodeList::from_options(&o), Ok(None));
        o.hosts = vec!["a:2".into()];
        assert_eq!(
            NodeList::from_options(&o),
            Ok(Some(NodeList {
                nodes: vec![node("a", 2, None)]
            }))
        );
        o.hosts.clear();
        o.hostfile = Some("/nonexistent/hosts".into());
        let e = NodeList::from_options(&o).err().unwrap_or_default();
        assert!(
            e.contains("cannot read the hostfile /nonexistent/hosts"),
            "{e}"
        );
    }

    #[test]
    fn the_default_launcher_is_local_only_when_every_node_is_this_machine() {
        let o = cli::Nodes::default();
        let nodes = |l: &str| hosts(l).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(launcher(&o, &nodes("localhost:2"), "n1"), Launcher::Local);
        assert_eq!(launcher(&o, &nodes("n1,n1.lab.org"), "n1"), Launcher::Local);
        assert_eq!(launcher(&o, &nodes("n1"), "n1.lab.org"), Launcher::Local);
        assert_eq!(launcher(&o, &nodes("n1,n2"), "n1"), Launcher::Ssh);
        assert_eq!(
            launcher(&o, &nodes("n1.other.org"), "n1.lab.org"),
            Launcher::Ssh
        );
        let o = cli::Nodes {
            launcher: Some(Launcher::Local),
            ..cli::Nodes::default()
        };
        assert_eq!(launcher(&o, &nodes("n1,n2"), "n1"), Launcher::Local);
    }

    #[test]
    fn map_by_slot_fills_each_node_across_app_contexts() {
        assert_eq!(
            place("a:2,b:3,c", &[2, 3], MapBy::Slot, false),
            Ok("a,a,b,b,b".into())
        );
        assert_eq!(
            place("a:2,b:3,c", &[1, 2, 3], MapBy::Slot, false),
            Ok("a,a,b,b,b,c".into())
        );
        assert_eq!(
            place("a:4,b:4", &[3], MapBy::Slot, false),
            Ok("a,a,a".into())
        );
    }

    #[test]
    fn map_by_node_goes_round_skipping_full_nodes() {
        assert_eq!(
            place("a:2,b:2,c:2", &[2, 3], MapBy::Node, false),
            Ok("a,b,c,a,b".into()),
            "the second app context goes on where the first left off"
        );
        assert_eq!(
            place("a:1,b:3,c:2", &[6], MapBy::Node, false),
            Ok("a,b,c,b,c,b".into())
        );
        let nodes = hosts("a:2,b:2,c:2").unwrap_or_else(|e| panic!("{e}"));
        let p = Placement::map(&nodes, &layout(&[4]), MapBy::Node, false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ranks, [vec![0, 3], vec![1], vec![2]]);
        assert_eq!(p.used(), [0, 1, 2]);
        assert_eq!(p.ranks_on(0), [0, 3]);
        assert_eq!(p.ranks_on(9), [] as [u32; 0]);
    }

    #[test]
    fn too_many_ranks_are_refused_without_oversubscribe() {
        for map_by in [MapBy::Slot, MapBy::Node] {
            let e = place("a:2,b", &[2, 2], map_by, false)
                .err()
                .unwrap_or_default();
            assert_eq!(
                e,
                "4 processes but only 3 slots on 2 hosts: use --oversubscribe or more hosts"
            );
        }
        let e = place("a:2", &[3], MapBy::Slot, false)
            .err()
            .unwrap_or_default();
        assert!(e.contains("only 2 slots on 1 host:"), "{e}");
    }

    #[test]
    fn oversubscribed_slot_mapping_wraps_in_proportion_to_slots() {
        // As if each node had its slots again: a gets 4 per pass, b 1.
        assert_eq!(
            place("a:4,b:1", &[10], MapBy::Slot, true),
            Ok("a,a,a,a,a,a,a,a,b,b".into())
        );
        // A partial pass fills in node order.
        assert_eq!(
            place("a:4,b:1", &[7], MapBy::Slot, true),
            Ok("a,a,a,a,a,a,b".into())
        );
        assert_eq!(
            place("a,b,c", &[2, 3], MapBy::Slot, true),
            Ok("a,a,b,b,c".into())
        );
        // Many passes cost no more than one.
        let nodes = hosts("a,b:2").unwrap_or_else(|e| panic!("{e}"));
        let p = Placement::map(&nodes, &layout(&[3_000_001]), MapBy::Slot, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.ranks[0].len(), p.ranks[1].len()), (1_000_001, 2_000_000));
    }

    #[test]
    fn oversubscribed_node_mapping_wraps_one_per_node() {
        assert_eq!(
            place("a:2,b", &[6], MapBy::Node, true),
            Ok("a,b,a,a,b,a".into())
        );
    }

    #[test]
    fn max_slots_bounds_oversubscription() {
        let nodes = NodeList::parse_hostfile("a slots=1 max_slots=2\nb slots=2\n", "hf")
            .unwrap_or_else(|e| panic!("{e}"));
        let p = Placement::map(&nodes, &layout(&[7]), MapBy::Slot, true)
            .unwrap_or_else(|e| panic!("{e}"));
        check_consistent(&p, 7);
        assert_eq!(names_of(&nodes, &p), "a,a,b,b,b,b,b");
        let p = Placement::map(&nodes, &layout(&[7]), MapBy::Node, true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names_of(&nodes, &p), "a,b,b,a,b,b,b");
        let capped = NodeList::parse_hostfile("a slots=1 max_slots=2\nb max_slots=1", "hf")
            .unwrap_or_else(|e| panic!("{e}"));
        for map_by in [MapBy::Slot, MapBy::Node] {
            let e = Placement::map(&capped, &layout(&[4]), map_by, true)
                .err()
                .unwrap_or_default();
            assert_eq!(
                e,
                "4 processes do not fit: every host is at its max_slots (3 in all)"
            );
            assert!(Placement::map(&capped, &layout(&[3]), map_by, true).is_ok());
        }
    }

    #[test]
    fn this_machine_alone_takes_any_number() {
        let nodes = NodeList::this_machine("here");
        for map_by in [MapBy::Slot, MapBy::Node] {
            let p = Placement::map(&nodes, &layout(&[1000, 24]), map_by, false)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.job_map(&nodes), JobMap::one_node("here", 1024));
        }
    }

    #[test]
    fn job_maps_name_only_the_nodes_used() {
        let nodes = hosts("a:2,b:2,c:2").unwrap_or_else(|e| panic!("{e}"));
        let p = Placement::map(&nodes, &layout(&[3]), MapBy::Slot, false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.job_map(&nodes),
            JobMap {
                names: vec!["a".into(), "b".into()],
                ranks: vec![vec![0, 1], vec![2]],
            }
        );
    }

    #[test]
    fn spawned_jobs_fill_the_free_slots_in_node_order() {
        let nodes = hosts("a:2,b:2,c:2").unwrap_or_else(|e| panic!("{e}"));
        let first = Placement::map(&nodes, &layout(&[3]), MapBy::Node, false)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut usage = SlotUsage::new(&nodes);
        usage.add(&first);
        assert_eq!((usage.on(0), usage.on(1), usage.on(2)), (1, 1, 1));
        let child = Placement::spawn(
            &nodes,
            &usage,
            &layout(&[1, 2]),
            false,
            &SpawnRules::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        check_consistent(&child, 3);
        assert_eq!(names_of(&nodes, &child), "a,b,c");
        usage.add(&child);
        let e = Placement::spawn(&nodes, &usage, &layout(&[1]), false, &SpawnRules::default())
            .err()
            .unwrap_or_default();
        assert_eq!(
            e,
            "no room for 1 more process: 0 of the 6 slots on 3 hosts are free \
             (pmixrun was started without --oversubscribe)"
        );
        let over = Placement::spawn(&nodes, &usage, &layout(&[7]), true, &SpawnRules::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names_of(&nodes, &over), "a,a,a,b,b,c,c");
        usage.remove(&first);
        let child = Placement::spawn(&nodes, &usage, &layout(&[3]), false, &SpawnRules::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names_of(&nodes, &child), "a,b,c");
        usage.remove(&child);
        usage.remove(&child);
        assert_eq!(usage, SlotUsage::new(&nodes), "never below zero");
    }

    #[test]
    fn spawned_jobs_respect_max_slots() {
        let nodes = NodeList::parse_hostfile("a slots=1 max_slots=1\nb slots=1", "hf")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut usage = SlotUsage::new(&nodes);
        let first = Placement::map(&nodes, &layout(&[2]), MapBy::Slot, false)
            .unwrap_or_else(|e| panic!("{e}"));
        usage.add(&first);
        let child = Placement::spawn(&nodes, &usage, &layout(&[2]), true, &SpawnRules::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names_of(&nodes, &child), "b,b");
        let lone = NodeList::parse_hostfile("a slots=1 max_slots=1", "hf")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut usage = SlotUsage::new(&lone);
        usage.add(&first);
        let e = Placement::spawn(&lone, &usage, &layout(&[1]), true, &SpawnRules::default())
            .err()
            .unwrap_or_default();
        assert_eq!(
            e,
            "no room for 1 more process: every host is at its max_slots"
        );
    }

    /// Three nodes of 3 slots, a job of one process on the first.
    fn parent_on_a() -> (NodeList, SlotUsage) {
        let nodes = hosts("a:3,b:3,c:3").unwrap_or_else(|e| panic!("{e}"));
        let mut usage = SlotUsage::new(&nodes);
        let first = Placement::map(&nodes, &layout(&[1]), MapBy::Slot, false)
            .unwrap_or_else(|e| panic!("{e}"));
        usage.add(&first);
        (nodes, usage)
    }

    #[test]
    fn spawned_jobs_go_to_the_hosts_they_name() {
        let (nodes, usage) = parent_on_a();
        let on = |hosts: Vec<Option<Vec<usize>>>, sizes: &[u32]| {
            let rules = SpawnRules {
                hosts,
                ..SpawnRules::default()
            };
            Placement::spawn(&nodes, &usage, &layout(sizes), false, &rules)
                .map(|p| names_of(&nodes, &p))
        };
        assert_eq!(on(vec![Some(vec![1])], &[2]), Ok("b,b".into()));
        // Each app its own hosts; the second app fills what the first left free on c.
        assert_eq!(
            on(vec![Some(vec![2]), None, Some(vec![2])], &[2, 2, 1]),
            Ok("c,c,a,a,c".into())
        );
        assert_eq!(
            on(vec![Some(vec![1])], &[4]),
            Err(
                "no room for 4 more processes: 3 of the 3 slots on 1 host are free \
                 (pmixrun was started without --oversubscribe)"
                    .into()
            )
        );
        // The spawn's own :OVERSUBSCRIBE.
        let rules = SpawnRules {
            hosts: vec![Some(vec![1])],
            oversubscribe: Some(true),
            ..SpawnRules::default()
        };
        let p = Placement::spawn(&nodes, &usage, &layout(&[4]), false, &rules)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names_of(&nodes, &p), "b,b,b,b");
    }

    #[test]
    fn spawned_jobs_map_by_node_or_so_many_per_node() {
        let (nodes, usage) = parent_on_a();
        let mapped = |map: SpawnMap, sizes: &[u32], over: bool| {
            let rules = SpawnRules {
                map,
                ..SpawnRules::default()
            };
            Placement::spawn(&nodes, &usage, &layout(sizes), over, &rules).map(|p| {
                check_consistent(&p, sizes.iter().sum());
                names_of(&nodes, &p)
            })
        };
        assert_eq!(mapped(SpawnMap::Slot, &[3], false), Ok("a,a,b".into()));
        assert_eq!(mapped(SpawnMap::Node, &[4], false), Ok("a,b,c,a".into()));
        assert_eq!(
            mapped(SpawnMap::PerNode(1), &[3], false),
            Ok("a,b,c".into())
        );
        // Per node is per job: the second app goes on where the first left off.
        assert_eq!(
            mapped(SpawnMap::PerNode(2), &[3, 2], false),
            Ok("a,a,b,b,c".into())
        );
        let e = mapped(SpawnMap::PerNode(1), &[4], true)
            .err()
            .unwrap_or_default();
        assert!(
            e.starts_with(
                "no room for 4 more processes: PMIX_MAPBY ppr:1:node places at most 1 per host"
            ),
            "{e}"
        );
        // ppr:3:node: a has 2 free slots, and only oversubscribing gives it its third.
        assert_eq!(
            mapped(SpawnMap::PerNode(3), &[9], true),
            Ok("a,a,a,b,b,b,c,c,c".into())
        );
        assert!(mapped(SpawnMap::PerNode(3), &[9], false).is_err());
    }
}

//! The command line: global options, then one or more application contexts separated by `:`.
//!
//! clap cannot express "repeat this group of options and a trailing command, separated by a
//! token", so the arguments are split on `:` tokens here and each segment is parsed on its own:
//! the first with the global options, the others with the per-application ones only.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser};

const EXAMPLES: &str = "\
Examples:
  Start 4 processes of ./app:
      pmixrun -n 4 ./app --its-flag

  Two application contexts in one job (ranks 0-1 run ./a, ranks 2-4 run ./b):
      pmixrun -n 2 ./a : -n 3 ./b input.txt

  Prefix every line of output with the rank that wrote it, give up after 60 seconds:
      pmixrun --tag-output --timeout 60 -n 8 ./app

  Run in /scratch with OMP_NUM_THREADS=2 and the launcher's own value of PATH:
      pmixrun -n 2 --wdir /scratch -x OMP_NUM_THREADS=2 -x PATH ./app

  8 processes on two machines with 4 slots each, started over ssh (ranks 0-3 on node1):
      pmixrun --host node1:4,node2:4 -n 8 ./app

  The hosts of a file (lines such as `node1 slots=4`), one rank per host in turn:
      pmixrun --hostfile hosts.txt --map-by node -n 8 ./app

  A program speaking PMI-2 (linked to Slurm's libpmi2, recognised; or MPICH built for PMI-2,
  served by the PMI socket MPICH programs get), and one over loopback TCP:
      pmixrun -n 4 ./libpmi2_app
      pmixrun --pmi pmi2-port -n 4 ./static_pmi2_app

  Pin each process to a core of its own and show where each went:
      pmixrun -n 4 --bind-to core --report-bindings ./app

  Four logical nodes on this machine, each run by a daemon of its own (for tests):
      pmixrun --launcher local --host 'n[1-4]:2' -n 8 ./app

  Share published names between separate runs (GLOBAL range) through a name server, and
  connect their processes (MPI_Comm_accept/MPI_Comm_connect; Open MPI 5 needs --one-session):
      pmixrun --nameserver --report-uri /tmp/ns.uri &
      pmixrun --nameserver-uri file:/tmp/ns.uri -n 1 ./server &
      pmixrun --nameserver-uri file:/tmp/ns.uri -n 1 ./client

Nodes: without --host or --hostfile, every process runs on this machine, with no limit on
their number. With them, pmixrun runs on the hosts named: on each host but this one a daemon
of its own (started by the --launcher, in a tree of fan-out --radix) starts that host's
processes, and their output, signals and exit statuses come back to this pmixrun. Ranks are
placed by --map-by, application contexts one after the other (the second starts where the
first ended). More processes than slots are refused unless --oversubscribe; with it the
extra ones wrap around the hosts again (--map-by slot: as if every host had its slots once
more, each host's ranks still consecutive; --map-by node: one per host in turn again), never
above a host's max_slots. A spawned job takes the slots the running jobs leave free, in host
order; beyond them it fails, unless --oversubscribe, when it wraps as --map-by slot does.

Placement on a node (docs/PLACEMENT.md): every process gets PMIX_CPUSET (the CPUs it may run
on), PMIX_LOCALITY_STRING and PMIX_PACKAGE_RANK, read from /sys and the CPUs pmixrun may use
(affinity mask, cgroup), and, unless --no-launcher-env, RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK (its node's index in the job), MASTER_ADDR (rank 0's host),
MASTER_PORT (--master-port, else 20000 + a hash of the namespace mod 10000),
OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/NODE_RANK, OMPI_UNIVERSE_SIZE, OMPI_WORLD_SIZE
and OMPI_WORLD_LOCAL_SIZE; a -x variable wins over them.

Name server mode: `pmixrun --nameserver [--report-uri FILE] [--socket PATH] [--one-session]`
serves names until SIGINT or SIGTERM, printing its URI on stdout (and into FILE). Each run
connected is a session of its own unless --one-session, which makes the SESSION range (Open
MPI 5 publishes and looks up there) reach every connected run. The name server is also where
runs meet to connect their processes (PMIx_Connect, and the fences and disconnects that follow
across runs): such a call fails with a status, never waits forever, when the other run is not
connected to the same name server, leaves it, or does not come within PMIX_TIMEOUT. Runs on
one node and runs with --host or --hostfile alike (there this pmixrun gathers its daemons'
parts and meets the other run for them). PMIXRS_NAMESERVER stands for --nameserver-uri. Without a name server, every range is served by pmixrun's own PMIx server, so
names are shared, and processes connected, within one run only.

Spawned jobs: a process may start further jobs (PMIx_Spawn). The n-th is namespace
rs-pmixrun-<pid>.<n>; its processes see PMIX_SPAWNED, PMIX_PARENT_ID and the spawn's job
information whose keys do not start with \"pmix\", and with --tag-output their lines read
`[n:rank] `. pmixrun runs until every job has ended. A spawn whose program or working
directory is missing fails with an error the spawning process receives; the run goes on.

Logging (PMIx_Log): PMIX_LOG_STDOUT and PMIX_LOG_STDERR text goes to pmixrun's stdout and
stderr, each line tagged [rank]; the syslog channels to the syslog daemon of pmixrun's node
(/dev/log, or the socket PMIXRS_SYSLOG_SOCKET names), at PMIX_LOG_SYSLOG_PRI (default
LOG_ERR); PMIX_LOG_JOB_RECORD to stderr as `pmixrun: job record: [rank] text`. Email and
global data stores are not served: a request none of whose channels could log fails with
PMIX_ERR_NOT_AVAILABLE.

Exit status: 0 when every process of every job exits 0; otherwise the status of the first
process that failed (128+S for a process killed by signal S), or the status a process passed
to abort. A process that connected and then exits without calling finalize fails the run.
Every job is killed (SIGTERM, then SIGKILL after --grace, 2 s) as soon as one process fails.
A process asked to end by PMIx_Job_control with PMIX_JOB_CTRL_TERMINATE gets SIGCONT and
SIGTERM, then SIGKILL after --grace if it is still there; PMIX_JOB_CTRL_KILL is SIGKILL. 124
means --timeout (which counts for every job) expired, 127 that a program of the command line
could not be found.

Tools and debuggers: tools of the same user attach to a one-node run by pmixrun's pid
(docs/TOOLS.md): they query the process table, receive events, kill or signal jobs
(PMIx_Job_control) and spawn. `pmixps` lists the runs and their processes. With
--stop-in-init every process waits in PMIx_Init (pmix-rs and libpmix clients alike) until a
tool sends PMIX_DEBUGGER_RELEASE: the tool registers for PMIX_READY_FOR_DEBUG, which comes
once every process waits, then releases the job. If the last tool so registered goes away
first, the held processes are aborted and the run fails: a job held for a debugger does not
wait forever for one that died.";

/// How many generations of spawned jobs a run allows unless `--max-spawn-depth` says
/// otherwise: the command line's job is generation 0, a job it spawns 1, and so on. A program
/// that spawns itself whenever it does not see itself as a child (OpenPMIx's `resolve`
/// example, under a launcher that does not give it `PMIX_PARENT_ID`) would otherwise spawn
/// until the machine gives out.
pub(crate) const MAX_SPAWN_DEPTH: u32 = 32;

/// `--grace`: seconds, a fraction allowed, at most an hour.
fn grace(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=3600.0).contains(&secs) {
        return Err(format!("{s} is not between 0 and 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The first segment: global options and the first application context.
#[derive(Parser, Debug)]
#[command(
    name = "pmixrun",
    version,
    about = "Launch a job of PMIx processes on this machine or on several",
    long_about = "Launch a job of PMIx processes on this machine or on several.\n\n\
        pmixrun starts a PMIx server, registers one job made of the application contexts \
        given (separated by ':'), starts every process with what it needs to connect, \
        forwards their output and signals, and exits with the job's status. Its processes \
        may spawn further jobs, which pmixrun starts the same way and waits for too. With \
        --host or --hostfile the job spans several hosts: pmixrun starts a daemon on each \
        host (over ssh, or as local processes with --launcher local), and the daemons, each \
        with a PMIx server of its own, start and serve their host's processes. Tools \
        (debuggers, monitors: PMIx_tool_init, python3-pmix's PMIxTool) attach to pmixrun by \
        its pid, on one host or several: with several, pmixrun itself serves them, for the \
        processes of every host (docs/TOOLS.md).",
    after_long_help = EXAMPLES,
    override_usage = "pmixrun [OPTIONS] [-n N] PROGRAM [ARGS]... [: [-n N] PROGRAM [ARGS]...]..."
)]
struct First {
    #[command(flatten)]
    global: Global,
    #[command(flatten)]
    app: AppArgs,
}

/// Every segment after the first: an application context only.
#[derive(Parser, Debug)]
#[command(
    name = "pmixrun",
    no_binary_name = true,
    disable_version_flag = true,
    override_usage = "... : [-n N] [--wdir DIR] [-x VAR[=VAL]]... PROGRAM [ARGS]..."
)]
struct Later {
    #[command(flatten)]
    app: AppArgs,
}

#[derive(Args, Debug)]
struct Global {
    /// Prefix every line a process writes with its rank, as `[rank] ` (`[n:rank] ` in the
    /// n-th spawned job; `[rank@host] ` when the job spans hosts).
    #[arg(long)]
    tag_output: bool,
    /// Kill every job and fail when the run (spawned jobs included) has not finished after
    /// SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: Option<u64>,
    /// How long a process asked to end (SIGTERM when the run fails or is interrupted,
    /// PMIX_JOB_CTRL_TERMINATE) has before SIGKILL; fractions allowed.
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = grace)]
    grace: Duration,
    /// Refuse a spawn whose job would be more than N generations below the command line's
    /// (a job spawned by a spawned job is generation 2): the spawn fails with
    /// PMIX_ERR_OUT_OF_RESOURCE and pmixrun says why; the run goes on.
    #[arg(long, value_name = "N", default_value_t = MAX_SPAWN_DEPTH)]
    max_spawn_depth: u32,
    /// Keep the run going when a process fails (exits with a status other than 0, is killed
    /// by a signal, ends without finalize, calls abort), as PRRTE's --enable-recovery: the
    /// others hear of it by events (PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_ABORTED), fences
    /// and gets that need it fail instead of waiting, and the run's exit status is the first
    /// failure's. Every job is recoverable unless its spawn says otherwise
    /// (PMIX_JOB_RECOVERABLE, PMIX_JOB_CONTINUOUS).
    #[arg(long)]
    enable_recovery: bool,
    /// Start a process of the job that failed (not one that called abort) again, the same
    /// rank, at most N times each, as PRRTE's --max-restarts; implies --enable-recovery, and a
    /// failure so recovered does not count for the exit status. A spawn may say otherwise for
    /// its job (PMIX_MAX_RESTARTS).
    #[arg(long, value_name = "N", default_value_t = 0)]
    max_restarts: u32,
    /// Log what pmixrun and its PMIx server do, to stderr (a set RUST_LOG filter wins).
    #[arg(short, long)]
    verbose: bool,
    /// Also be this node's system server (as `prterun --system-server`): tools that ask for
    /// the system server (`PMIX_CONNECT_TO_SYSTEM`) find this run's (one per node at a time).
    #[arg(long)]
    system_server: bool,
    /// Serve publish/lookup, and connects with other runs' processes, through the name server
    /// at URI (`unix:PATH`, or `file:FILE` holding such a URI), shared with other runs;
    /// default $PMIXRS_NAMESERVER.
    #[arg(long, value_name = "URI")]
    nameserver_uri: Option<String>,
    /// The process-management protocol the processes speak: `pmix` (this project's PMIx
    /// client), `pmi1` (MPICH's simple PMI over an inherited socket, PMI_FD, as Hydra does),
    /// `pmi1-port` (simple PMI over loopback TCP, PMI_PORT and PMI_ID), `pmi2` and `pmi2-port`
    /// (PMI-2, as Slurm's libpmi2 and MPICH built --with-pmi=pmi2 speak it, over the same two
    /// transports; a PMI socket serves either version, the process's init picks), or `auto`:
    /// `pmi2` when a program of the command line links libpmi2, `pmi1` when it links MPICH's
    /// shared library, else `pmix`. Jobs the processes spawn speak the same.
    #[arg(long, value_enum, default_value_t = Protocol::Auto, value_name = "PROTOCOL")]
    pmi: Protocol,
    /// Hold every process in its PMIx init until a debugger (a tool attached to pmixrun)
    /// releases it with PMIX_DEBUGGER_RELEASE; if the last tool waiting for the job
    /// (registered for PMIX_READY_FOR_DEBUG) goes away first, the run fails. PMIx processes
    /// only; with --host every node's processes are held, and debuggers attach to pmixrun,
    /// the root.
    #[arg(long)]
    stop_in_init: bool,
    /// Which processes of the job read pmixrun's stdin: a rank, `all`, or `none` (every
    /// process's stdin is then /dev/null and pmixrun does not read its own). pmixrun's end of
    /// file closes theirs. Tools attached to pmixrun (docs/TOOLS.md) may push input to the
    /// same processes (PMIx_IOF_push) and pull every process's output (PMIx_IOF_pull), which
    /// pmixrun forwards to them as well as to its own stdout and stderr. With --host the
    /// input goes down to the daemons of the ranks named (tools attach to the root there,
    /// and may pull output but not push input: docs/TOOLS.md, "Multi-node runs").
    #[arg(long, value_name = "RANK|all|none", default_value = "0")]
    stdin: crate::node::stdin::Target,
    #[command(flatten)]
    nodes: NodeArgs,
    #[command(flatten)]
    place: PlaceArgs,
}

/// Where on its node each process runs, and the environment it is told its place in.
#[derive(Args, Debug)]
#[command(next_help_heading = "Placement on a node")]
struct PlaceArgs {
    /// Pin each process to one object of this kind: `none` (every process may run on every
    /// CPU pmixrun may use; the default, unless --map-by names an object, which is then the
    /// default), `core`, `package` (`socket`) or `numa`. The objects that have CPUs pmixrun
    /// may use (its affinity mask and cgroup) are dealt out to the node's processes in
    /// local-rank order, again from the first when there are more processes than objects.
    #[arg(long, value_enum, value_name = "OBJECT")]
    bind_to: Option<BindTo>,
    /// Print each process's CPUs, object and locality string on stderr as it starts
    /// (`pmixrun: [host:rank] bound to core 1: CPUs 1 (SK0:...)`).
    #[arg(long)]
    report_bindings: bool,
    /// Do not set the variables ML and MPI programs read their place from (RANK, LOCAL_RANK,
    /// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, OMPI_COMM_WORLD_*,
    /// OMPI_UNIVERSE_SIZE, OMPI_WORLD_SIZE, OMPI_WORLD_LOCAL_SIZE).
    #[arg(long)]
    no_launcher_env: bool,
    /// The MASTER_PORT processes are given (default: 20000 + a hash of the job's namespace
    /// modulo 10000, the same on every node; not checked to be free).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    master_port: Option<u16>,
}

/// What a process is pinned to (`--bind-to`).
#[derive(
    clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum BindTo {
    /// Not pinned.
    None,
    /// One core (all its hardware threads).
    Core,
    /// One package.
    #[value(alias = "socket")]
    Package,
    /// One NUMA node.
    Numa,
}

/// Where on its node each process runs and what it is told of its place (`binding.rs`,
/// `launcher_env.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Place {
    /// The objects a node's processes go to in turn (`--map-by core|package|numa`), or
    /// `BindTo::None`.
    pub(crate) map_to: BindTo,
    /// `--bind-to`, or its default.
    pub(crate) bind_to: BindTo,
    /// `--report-bindings`.
    pub(crate) report_bindings: bool,
    /// Not `--no-launcher-env`.
    pub(crate) launcher_env: bool,
    /// `--master-port`.
    pub(crate) master_port: Option<u16>,
}

impl Default for Place {
    /// Not bound, not reported, the launcher variables set.
    fn default() -> Place {
        Place {
            map_to: BindTo::None,
            bind_to: BindTo::None,
            report_bindings: false,
            launcher_env: true,
            master_port: None,
        }
    }
}

/// Where the processes run.
#[derive(Args, Debug)]
#[command(next_help_heading = "Nodes")]
struct NodeArgs {
    /// Run on these hosts: a comma-separated list of `name` or `name:slots` (1 slot when not
    /// given; a name given twice adds its slots: `a,a,b` is `a:2,b:1`), a name possibly a
    /// range as in Slurm (`node[1-4]:2`). May be repeated.
    #[arg(
        short = 'H',
        long = "host",
        value_name = "LIST",
        conflicts_with = "hostfile"
    )]
    host: Vec<String>,
    /// Run on the hosts of FILE: one `name [slots=N] [max_slots=M]` per line (1 slot when not
    /// given), `#` comments.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// `slot`: each host in turn takes as many consecutive ranks as it has slots; `node`: one
    /// rank per host in turn. `core`, `package` (`socket`), `numa`: hosts as `slot`, and on
    /// each host the processes go to objects of that kind in turn (rank 0 on the first
    /// package, rank 1 on the second...), bound to that object unless --bind-to says
    /// otherwise (docs/PLACEMENT.md).
    #[arg(long, value_enum, default_value_t = MapBy::Slot, value_name = "POLICY")]
    map_by: MapBy,
    /// Allow more processes than slots: the ranks beyond them wrap around the hosts again
    /// (never above a hostfile's max_slots).
    #[arg(long)]
    oversubscribe: bool,
    /// How the daemons of the other hosts start: `ssh` (through --launch-agent), `local`
    /// (every host named is a logical node on this machine), `slurm` (srun, inside an
    /// allocation). Default: `ssh` when a host is another machine, else `local`.
    #[arg(long, value_enum, value_name = "LAUNCHER")]
    launcher: Option<Launcher>,
    /// The command that runs a command on another host, as `CMD... HOST COMMAND...` (split
    /// at blanks).
    #[arg(long, value_name = "CMD", default_value = "ssh")]
    launch_agent: String,
    /// The fan-out of the tree of daemons: each starts and serves at most K others.
    #[arg(
        long,
        value_name = "K",
        default_value_t = 16,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    radix: u32,
    /// Test-only: every message of the tree waits this long before it is written to a link
    /// (the cost curve's simulated network latency; the kernel here has no netem).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 0, hide = true)]
    tree_link_delay_us: u64,
}

/// How ranks are laid out on the nodes (`--map-by`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MapBy {
    /// Fill each node's slots, in node order.
    Slot,
    /// One rank per node in turn.
    Node,
    /// As `slot`, each node's processes going to its cores in turn.
    Core,
    /// As `slot`, each node's processes going to its packages in turn.
    #[value(alias = "socket")]
    Package,
    /// As `slot`, each node's processes going to its NUMA nodes in turn.
    Numa,
}

impl MapBy {
    /// The kind of object a node's processes go to in turn, if any ([`BindTo::None`]: none).
    pub(crate) fn object(self) -> BindTo {
        match self {
            MapBy::Slot | MapBy::Node => BindTo::None,
            MapBy::Core => BindTo::Core,
            MapBy::Package => BindTo::Package,
            MapBy::Numa => BindTo::Numa,
        }
    }
}

/// How the daemons of a multi-node run are started (`--launcher`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Launcher {
    /// Through the launch agent (`ssh`), each daemon starting its children in the tree.
    Ssh,
    /// As processes of this machine, one per logical node.
    Local,
    /// Through one `srun` inside a Slurm allocation (the default there without a host list).
    Slurm,
}

/// The protocol a run's processes speak to pmixrun's server.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Decided by looking at the programs.
    Auto,
    /// PMIx, through `pmix-client`.
    Pmix,
    /// MPICH's PMI-1 over an inherited socket.
    Pmi1,
    /// MPICH's PMI-1 over loopback TCP.
    #[value(name = "pmi1-port")]
    Pmi1Port,
    /// PMI-2 (Slurm's libpmi2, MPICH built for PMI-2) over an inherited socket.
    Pmi2,
    /// PMI-2 over loopback TCP.
    #[value(name = "pmi2-port")]
    Pmi2Port,
}

impl Protocol {
    /// A PMI version (1 or 2) rather than PMIx: the processes get a PMI socket or port,
    /// which serves either version.
    pub(crate) fn is_pmi(self) -> bool {
        !matches!(self, Protocol::Auto | Protocol::Pmix)
    }

    /// PMI over loopback TCP (`PMI_PORT`, `PMI_ID`) rather than an inherited socket.
    pub(crate) fn over_port(self) -> bool {
        matches!(self, Protocol::Pmi1Port | Protocol::Pmi2Port)
    }
}

/// `pmixrun --nameserver ...`: run a name server instead of a job.
#[derive(Parser, Debug)]
#[command(
    name = "pmixrun --nameserver",
    no_binary_name = true,
    disable_version_flag = true,
    about = "Run a name server that separate pmixrun runs share for published names and connects"
)]
struct NameServerArgs {
    /// Write the server's URI into FILE once it is listening.
    #[arg(long, value_name = "FILE")]
    report_uri: Option<PathBuf>,
    /// Listen on this socket path (default: a private directory under $TMPDIR).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Make the runs connected one session: their SESSION-range names (the default range,
    /// and the only one Open MPI 5's MPI_Publish_name offers besides a namespace) reach each
    /// other, as the jobs of one allocation do.
    #[arg(long)]
    one_session: bool,
    /// Log what the name server does, to stderr.
    #[arg(short, long)]
    verbose: bool,
}

/// What `pmixrun --nameserver` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameServerOptions {
    /// Where to report the URI.
    pub(crate) report_uri: Option<PathBuf>,
    /// The socket path, if chosen.
    pub(crate) socket: Option<PathBuf>,
    /// The connected runs are one session.
    pub(crate) one_session: bool,
    /// Log at debug level.
    pub(crate) verbose: bool,
}

/// What pmixrun was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Run a job.
    Job(Options),
    /// Run a name server.
    NameServer(NameServerOptions),
}

/// Parses a command line that may ask for name-server mode.
pub(crate) fn parse_mode(args: Vec<OsString>) -> Result<Mode, clap::Error> {
    if args.first().is_some_and(|a| a == "--nameserver") {
        let a = NameServerArgs::try_parse_from(&args[1..])?;
        return Ok(Mode::NameServer(NameServerOptions {
            report_uri: a.report_uri,
            socket: a.socket,
            one_session: a.one_session,
            verbose: a.verbose,
        }));
    }
    parse(args).map(Mode::Job)
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Application context (each of them)")]
struct AppArgs {
    /// Number of processes of this application context (default: with one application
    /// context on named nodes or in a Slurm allocation, one per slot, as mpirun does; else 1).
    #[arg(
        short = 'n',
        long = "np",
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    np: Option<u32>,
    /// Working directory of its processes (default: pmixrun's).
    #[arg(long, value_name = "DIR")]
    wdir: Option<PathBuf>,
    /// Set VAR to VAL in its processes; `-x VAR` alone passes pmixrun's own value on.
    #[arg(short = 'x', value_name = "VAR[=VAL]")]
    env: Vec<OsString>,
    /// Name of the process set its processes form (`PMIX_PSET_NAME`; Open MPI's
    /// `MPI_Group_from_session_pset` finds it; PMIx queries list it and its members; a
    /// `PMIX_PROCESS_SET_DEFINE` announces it).
    #[arg(long, value_name = "NAME")]
    pset: Option<String>,
    /// The program to run and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        value_name = "PROGRAM [ARGS]"
    )]
    command: Vec<OsString>,
}

/// One application context: `-n N PROGRAM ARGS...` with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct App {
    /// How many processes run it.
    pub(crate) np: u32,
    /// The program, as given (searched in `PATH` when it has no `/`).
    pub(crate) program: OsString,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
    /// Its working directory, if not pmixrun's.
    pub(crate) wdir: Option<PathBuf>,
    /// Environment variables to set: `(name, value)`, the value `None` for `-x VAR`.
    pub(crate) env: Vec<(OsString, Option<OsString>)>,
    /// The process set its processes form, if named.
    pub(crate) pset: Option<String>,
}

/// Everything the command line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// Prefix output lines with the rank.
    pub(crate) tag_output: bool,
    /// Kill the job after this long.
    pub(crate) timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL.
    pub(crate) grace: Duration,
    /// The deepest generation of spawned jobs allowed.
    pub(crate) max_spawn_depth: u32,
    /// A failed process does not stop the run (`--enable-recovery`).
    pub(crate) enable_recovery: bool,
    /// How many times a failed process is started again (`--max-restarts`).
    pub(crate) max_restarts: u32,
    /// Log at debug level.
    pub(crate) verbose: bool,
    /// Be the node's system server too.
    pub(crate) system_server: bool,
    /// The name server to use, as given (not yet resolved).
    pub(crate) nameserver_uri: Option<String>,
    /// The protocol of the processes.
    pub(crate) pmi: Protocol,
    /// Hold the processes in init for a debugger.
    pub(crate) stop_in_init: bool,
    /// Which processes read pmixrun's stdin.
    pub(crate) stdin: crate::node::stdin::Target,
    /// Where the processes run.
    pub(crate) nodes: Nodes,
    /// Where on its node each process runs.
    pub(crate) place: Place,
    /// The application contexts, in rank order.
    pub(crate) apps: Vec<App>,
    /// Whether any application context said how many processes it has (`-n`): if none did,
    /// a run of one context on named nodes or in an allocation fills their slots.
    pub(crate) counts_given: bool,
}

/// What the command line says about the nodes (see `plan/placement.rs` for what it means).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nodes {
    /// The `--host` lists, as given; empty without `--host`.
    pub(crate) hosts: Vec<String>,
    /// The `--hostfile`.
    pub(crate) hostfile: Option<PathBuf>,
    /// `--map-by`.
    pub(crate) map_by: MapBy,
    /// `--oversubscribe`.
    pub(crate) oversubscribe: bool,
    /// `--launcher`, if given (the default depends on the hosts: `placement::launcher`).
    pub(crate) launcher: Option<Launcher>,
    /// The launch agent's command and its first arguments, never empty: the host and the
    /// command to run there follow them.
    pub(crate) launch_agent: Vec<String>,
    /// The tree's fan-out, at least 1.
    pub(crate) radix: u32,
    /// Test-only: the delay every tree message waits before it is written (0: none).
    pub(crate) link_delay: Duration,
}

impl Default for Nodes {
    /// This machine alone, as without any node option.
    fn default() -> Nodes {
        Nodes {
            hosts: Vec::new(),
            hostfile: None,
            map_by: MapBy::Slot,
            oversubscribe: false,
            launcher: None,
            launch_agent: vec!["ssh".into()],
            radix: 16,
            link_delay: Duration::ZERO,
        }
    }
}

fn nodes(a: NodeArgs) -> Result<Nodes, clap::Error> {
    let launch_agent: Vec<String> = a
        .launch_agent
        .split_whitespace()
        .map(String::from)
        .collect();
    if launch_agent.is_empty() {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            "--launch-agent: an empty command\n",
        ));
    }
    Ok(Nodes {
        hosts: a.host,
        hostfile: a.hostfile,
        map_by: a.map_by,
        oversubscribe: a.oversubscribe,
        launcher: a.launcher,
        launch_agent,
        radix: a.radix,
        link_delay: Duration::from_micros(a.tree_link_delay_us),
    })
}

/// Splits `VAR[=VAL]` at the first `=`.
pub(crate) fn parse_env(spec: &OsStr) -> Result<(OsString, Option<OsString>), String> {
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(spec);
    let (name, value) = match bytes.iter().position(|&b| b == b'=') {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    };
    if name.is_empty() {
        return Err(format!(
            "-x {}: the variable name is empty",
            spec.to_string_lossy()
        ));
    }
    let os = |b: &[u8]| OsString::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b));
    Ok((os(name), value.map(os)))
}

fn app(a: AppArgs) -> Result<App, clap::Error> {
    let mut command = a.command.into_iter();
    let program = command.next().ok_or_else(|| {
        clap::Error::raw(
            clap::error::ErrorKind::MissingRequiredArgument,
            "an application context has no program\n",
        )
    })?;
    let env = a
        .env
        .iter()
        .map(|s| parse_env(s))
        .collect::<Result<_, _>>()
        .map_err(|m| clap::Error::raw(clap::error::ErrorKind::InvalidValue, m + "\n"))?;
    Ok(App {
        np: a.np.unwrap_or(1),
        program,
        args: command.collect(),
        wdir: a.wdir,
        env,
        pset: a.pset,
    })
}

/// Parses the arguments after the program name. Errors (and `--help`, `--version`) come back as
/// clap errors, whose `exit()` prints them the usual way.
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Options, clap::Error> {
    let mut segments: Vec<Vec<OsString>> = vec![Vec::new()];
    for arg in args {
        if arg == ":" {
            segments.push(Vec::new());
        } else if let Some(last) = segments.last_mut() {
            last.push(arg);
        }
    }
    let mut segments = segments.into_iter();
    let first = segments.next().unwrap_or_default();
    let first = First::try_parse_from(std::iter::once(OsString::from("pmixrun")).chain(first))?;
    let mut counts_given = first.app.np.is_some();
    let mut apps = vec![app(first.app)?];
    for seg in segments {
        if seg.is_empty() {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::MissingRequiredArgument,
                "an empty application context: ':' must be followed by [-n N] PROGRAM\n",
            ));
        }
        let later = Later::try_parse_from(seg)?.app;
        counts_given |= later.np.is_some();
        apps.push(app(later)?);
    }
    let map_to = first.global.nodes.map_by.object();
    Ok(Options {
        tag_output: first.global.tag_output,
        timeout: first.global.timeout.map(Duration::from_secs),
        grace: first.global.grace,
        max_spawn_depth: first.global.max_spawn_depth,
        enable_recovery: first.global.enable_recovery,
        max_restarts: first.global.max_restarts,
        verbose: first.global.verbose,
        system_server: first.global.system_server,
        nameserver_uri: first.global.nameserver_uri,
        pmi: first.global.pmi,
        stop_in_init: first.global.stop_in_init,
        stdin: first.global.stdin,
        nodes: nodes(first.global.nodes)?,
        place: Place {
            map_to,
            bind_to: first.global.place.bind_to.unwrap_or(map_to),
            report_bindings: first.global.place.report_bindings,
            launcher_env: !first.global.place.no_launcher_env,
            master_port: first.global.place.master_port,
        },
        apps,
        counts_given,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `line` split at blanks; `__` stands for a blank inside an argument.
    fn p(line: &str) -> Result<Options, clap::Error> {
        parse(
            line.split_whitespace()
                .map(|a| OsString::from(a.replace("__", " "))),
        )
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_count_is_given_when_any_context_says_one() {
        let given = |line: &str| p(line).map(|o| (o.counts_given, o.apps[0].np)).ok();
        assert_eq!(given("./a"), Some((false, 1)));
        assert_eq!(given("-n 3 ./a"), Some((true, 3)));
        assert_eq!(given("./a : -n 2 ./b"), Some((true, 1)));
        assert_eq!(given("./a : ./b"), Some((false, 1)));
    }

    #[test]
    fn placement_options_and_their_defaults() {
        let d = p("./a").map(|o| o.place).map_err(|e| e.to_string());
        assert_eq!(d, Ok(Place::default()));
        let o = p("--bind-to socket --report-bindings --no-launcher-env --master-port 29500 ./a")
            .map(|o| o.place)
            .map_err(|e| e.to_string());
        assert_eq!(
            o,
            Ok(Place {
                map_to: BindTo::None,
                bind_to: BindTo::Package,
                report_bindings: true,
                launcher_env: false,
                master_port: Some(29500),
            })
        );
        let by_package = p("--map-by socket ./a").map(|o| (o.place, o.nodes.map_by));
        let want = Place {
            map_to: BindTo::Package,
            bind_to: BindTo::Package,
            ..Place::default()
        };
        assert_eq!(by_package.ok(), Some((want, MapBy::Package)));
        let unbound = p("--map-by numa --bind-to none ./a").map(|o| o.place);
        assert_eq!(
            unbound.ok().map(|p| (p.map_to, p.bind_to)),
            Some((BindTo::Numa, BindTo::None))
        );
        for bad in [
            "--bind-to hwthread ./a",
            "--master-port 0 ./a",
            "--master-port 70000 ./a",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_app_with_its_own_flags_left_alone() {
        let o = p("-n 4 ./demo -n 3 --verbose : x").map(|o| o.apps[0].clone());
        let a = o.map_err(|e| e.to_string());
        assert_eq!(
            a,
            Ok(App {
                np: 4,
                program: "./demo".into(),
                args: os(&["-n", "3", "--verbose"]),
                wdir: None,
                env: vec![],
                pset: None,
            })
        );
    }

    #[test]
    fn stdin_goes_to_rank_0_unless_told() {
        use crate::node::stdin::Target;
        let stdin = |line: &str| p(line).map(|o| o.stdin).map_err(|e| e.to_string());
        assert_eq!(stdin("a"), Ok(Target::Rank(0)));
        assert_eq!(stdin("--stdin all a"), Ok(Target::All));
        assert_eq!(stdin("--stdin none a"), Ok(Target::None));
        assert_eq!(stdin("--stdin 3 -n 4 a"), Ok(Target::Rank(3)));
        assert!(stdin("--stdin some a").is_err());
    }

    #[test]
    fn global_options_and_several_app_contexts() {
        let o = p("--tag-output --timeout 7 -v --np 2 -x A=1 -x B --wdir /tmp a 1 : -n 3 b : c")
            .map_err(|e| e.to_string());
        let Ok(o) = o else { panic!("{o:?}") };
        assert!(o.tag_output && o.verbose);
        assert_eq!(o.timeout, Some(Duration::from_secs(7)));
        assert_eq!(o.grace, Duration::from_secs(2));
        let g = p("--grace 0.25 a")
            .map(|o| o.grace)
            .map_err(|e| e.to_string());
        assert_eq!(g, Ok(Duration::from_millis(250)));
        assert_eq!(o.apps.len(), 3);
        assert_eq!(o.apps[0].np, 2);
        assert_eq!(o.apps[0].program, "a");
        assert_eq!(o.apps[0].args, os(&["1"]));
        assert_eq!(o.apps[0].wdir, Some(PathBuf::from("/tmp")));
        let with_pset = p("--pset x -n 2 a : b").map_err(|e| e.to_string());
        let psets: Option<Vec<Option<String>>> = with_pset
            .ok()
            .map(|o| o.apps.iter().map(|a| a.pset.clone()).collect());
        assert_eq!(psets, Some(vec![Some("x".to_owned()), None]));
        assert_eq!(
            o.apps[0].env,
            vec![("A".into(), Some("1".into())), ("B".into(), None)]
        );
        assert_eq!(
            (o.apps[1].np, o.apps[1].program.as_os_str()),
            (3, "b".as_ref())
        );
        assert_eq!(
            (o.apps[2].np, o.apps[2].program.as_os_str()),
            (1, "c".as_ref())
        );
        assert!(o.apps[1].args.is_empty() && o.apps[2].env.is_empty());
    }

    #[test]
    fn env_values_may_hold_equal_signs_and_be_empty() {
        assert_eq!(
            parse_env("X=a=b".as_ref()),
            Ok(("X".into(), Some("a=b".into())))
        );
        assert_eq!(parse_env("X=".as_ref()), Ok(("X".into(), Some("".into()))));
        assert!(parse_env("=v".as_ref()).is_err());
        assert!(p("-x =v a").is_err());
    }

    #[test]
    fn double_dash_ends_the_options() {
        let o = p("-n 2 -- -weird-program -n 1").map_err(|e| e.to_string());
        let Ok(o) = o else { panic!("{o:?}") };
        assert_eq!(o.apps[0].program, "-weird-program");
        assert_eq!(o.apps[0].args, os(&["-n", "1"]));
    }

    #[test]
    fn malformed_command_lines_are_refused() {
        for bad in [
            "",
            "-n 2",
            "-n 0 a",
            "-n x a",
            "a :",
            "a : : b",
            "a : --tag-output b",
            "a : --timeout 3 b",
            "--timeout 0 a",
            "--grace -1 a",
            "--grace soon a",
            "--timeout -1 a",
            "--bogus a",
        ] {
            assert!(p(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn name_server_mode_and_option() {
        let m =
            parse_mode(os(&["--nameserver", "--report-uri", "/tmp/u"])).map_err(|e| e.to_string());
        assert_eq!(
            m,
            Ok(Mode::NameServer(NameServerOptions {
                report_uri: Some("/tmp/u".into()),
                socket: None,
                one_session: false,
                verbose: false,
            }))
        );
        let m = parse_mode(os(&["--nameserver", "--one-session"])).map_err(|e| e.to_string());
        assert!(
            matches!(&m, Ok(Mode::NameServer(o)) if o.one_session),
            "{m:?}"
        );
        assert!(parse_mode(os(&["--nameserver", "prog"])).is_err());
        let o = p("--nameserver-uri unix:/x -n 2 a").map_err(|e| e.to_string());
        let Ok(o) = o else { panic!("{o:?}") };
        assert_eq!(o.nameserver_uri.as_deref(), Some("unix:/x"));
        assert!(
            p("a : --nameserver-uri unix:/x b").is_err(),
            "a global option"
        );
    }

    #[test]
    fn node_options() {
        let o = p("-n 2 a").map_err(|e| e.to_string());
        assert_eq!(o.map(|o| o.nodes), Ok(Nodes::default()));
        let o = p(
            "-H a:2,b --host c --map-by node --oversubscribe --launcher local \
                   --launch-agent ssh__-q__-oBatchMode=yes --radix 4 -n 2 x",
        )
        .map_err(|e| e.to_string());
        let Ok(o) = o else { panic!("{o:?}") };
        assert_eq!(
            o.nodes,
            Nodes {
                hosts: vec!["a:2,b".into(), "c".into()],
                hostfile: None,
                map_by: MapBy::Node,
                oversubscribe: true,
                launcher: Some(Launcher::Local),
                launch_agent: vec!["ssh".into(), "-q".into(), "-oBatchMode=yes".into()],
                radix: 4,
                link_delay: Duration::ZERO,
            }
        );
        let o = p("--hostfile /h --launcher slurm a").map_err(|e| e.to_string());
        let Ok(o) = o else { panic!("{o:?}") };
        assert_eq!(o.nodes.hostfile, Some(PathBuf::from("/h")));
        assert_eq!(o.nodes.launcher, Some(Launcher::Slurm));
        for bad in [
            "--host a --hostfile /h x",
            "--map-by hwthread x",
            "--radix 0 x",
            "--launcher rsh x",
            "--launch-agent __ x",
            "a : --host b c",
        ] {
            assert!(p(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn help_and_version_are_clap_displays() {
        let help = p("--help").err().map(|e| (e.kind(), e.to_string()));
        let Some((kind, text)) = help else {
            panic!("--help parsed")
        };
        assert_eq!(kind, clap::error::ErrorKind::DisplayHelp);
        assert!(text.contains("pmixrun -n 2 ./a : -n 3 ./b"), "{text}");
        assert!(text.contains("Spawned jobs: "), "{text}");
        assert!(
            text.contains("pmixrun --host node1:4,node2:4 -n 8"),
            "{text}"
        );
        assert!(text.contains("--oversubscribe"), "{text}");
        let v = p("--version").err().map(|e| e.kind());
        assert_eq!(v, Some(clap::error::ErrorKind::DisplayVersion));
    }
}

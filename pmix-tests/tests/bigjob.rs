//! A large job with real local clients: 1,000 nodes × 100 ranks registered with pmixrun's maps
//! on a server that is one of those nodes, and a pmix-rs client, a libpmix 4.2 client and a
//! libpmix 5.0.11 client started as three of its local ranks. Each reads the job data of ranks
//! on its own node and on others (`pmix_jobinfo.c` and its twin `pmix-jobinfo-client`); the
//! three must print the same values with the same types, and those must be what the maps say
//! (worked out here, independently of the server's derivation).

use std::time::Duration;

use pmix_server::{NoHost, ServerOptions};
use pmix_tests::{
    Finished, TestHost, openpmix_program, use_ompi5_libpmix, wait_all, workspace_bin,
};
use pmix_types::{DataArray, Info, Nspace, Proc, Rank, Value, attr};

const NODES: u32 = 1_000;
const PPN: u32 = 100;
/// The server's node: node `HERE + 1` by name (names count from 1, ids from 0).
const HERE: u32 = 500;

fn host_of(node: u32) -> String {
    format!("node{:05}", node + 1)
}

/// Registers the job as pmixrun does (node and process maps, one app) and the three local
/// ranks as clients.
fn register(h: &TestHost, local: &[u32]) -> Nspace {
    let names: Vec<String> = (0..NODES).map(host_of).collect();
    let ranks: Vec<Vec<u32>> = (0..NODES)
        .map(|n| (n * PPN..(n + 1) * PPN).collect())
        .collect();
    let nmap = pmix_regex::generate_regex(&names).expect("node map");
    let pmap = pmix_regex::generate_ppn(&ranks).expect("proc map");
    let size = NODES * PPN;
    let app = DataArray::from_infos([
        Info::attr(attr::APPNUM, 0u32),
        Info::attr(attr::APP_SIZE, size),
        Info::attr(attr::APPLDR, Rank(0)),
    ]);
    let info = vec![
        Info::attr(attr::JOB_SIZE, size),
        Info::attr(attr::NODE_MAP, Value::Regex(nmap)),
        Info::attr(attr::PROC_MAP, Value::Regex(pmap)),
        Info::attr(attr::APP_INFO_ARRAY, app),
    ];
    let ns = Nspace::new("big").expect("namespace");
    h.server
        .register_nspace(&ns, PPN, &info)
        .expect("register_nspace");
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    for &r in local {
        h.server
            .register_client(&Proc::new(ns.clone(), r), uid, gid)
            .expect("register_client");
    }
    ns
}

/// What a client must print, asked about `ranks`, from the maps alone. libpmix 4.2 answers a
/// rank's `NODEID` only for the ranks of its own node (under OpenPMIx's own server too; 5.0.11
/// answers them all): with `libpmix_4`, the others' read "none".
fn expected(ranks: &[u32], libpmix_4: bool) -> Vec<String> {
    let peers = |node: u32| {
        (node * PPN..(node + 1) * PPN)
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = vec![
        format!("job size u32 {}", NODES * PPN),
        format!("job local_size u32 {PPN}"),
        format!("job local_peers str {}", peers(HERE)),
    ];
    for &r in ranks {
        let node = r / PPN;
        out.push(format!("{r} hostname str {}", host_of(node)));
        if libpmix_4 && node != HERE {
            out.push(format!("{r} nodeid none"));
        } else {
            out.push(format!("{r} nodeid u32 {node}"));
        }
        out.push(format!("{r} local_rank u16 {}", r % PPN));
        out.push(format!("{r} node_rank u16 {}", r % PPN));
        out.push(format!("{r} global_rank rank {r}"));
        out.push(format!("{r} appnum u32 0"));
        out.push(format!("{r} app_rank rank {r}"));
    }
    let first = ranks[0] / PPN;
    out.push(format!("node local_size u32 {PPN}"));
    out.push(format!("node local_peers str {}", peers(first)));
    out
}

fn lines_of(f: &Finished) -> Vec<String> {
    assert_eq!(
        f.code,
        Some(0),
        "{} failed:\nstdout: {}\nstderr: {}",
        f.proc,
        f.stdout,
        f.stderr
    );
    let mut lines: Vec<String> = f.stdout.lines().map(str::to_owned).collect();
    assert_eq!(
        lines.pop().as_deref(),
        Some(format!("OK rank={}", f.proc.rank).as_str()),
        "{}: {}",
        f.proc,
        f.stdout
    );
    lines
}

#[test]
fn pmix_rs_and_libpmix_4_and_5_clients_read_the_same_job_data_of_a_100k_job() {
    let here = HERE * PPN;
    let local = [here, here + 1, here + 2];
    let h = TestHost::start_with(
        NoHost,
        ServerOptions {
            hostname: Some(host_of(HERE)),
            ..ServerOptions::default()
        },
    );
    let ns = register(&h, &local);
    // A rank on another node first (its node's values are asked by its hostname), then the
    // last rank of the job, one of this node and one far from it.
    let asked = [0, NODES * PPN - 1, here + 7, 77_777];
    let args: Vec<String> = asked.iter().map(u32::to_string).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c_client = openpmix_program("pmix_jobinfo");
    let started = vec![
        h.spawn_program(
            &workspace_bin("pmix-jobinfo-client"),
            &Proc::new(ns.clone(), local[0]),
            &args,
            &[],
        ),
        h.spawn_program(&c_client, &Proc::new(ns.clone(), local[1]), &args, &[]),
        {
            // libpmix 5.0.11 instead of Debian's 4.2, for the same program.
            let mut cmd = std::process::Command::new("true");
            use_ompi5_libpmix(&mut cmd);
            let dir = cmd
                .get_envs()
                .find(|(k, _)| *k == "LD_LIBRARY_PATH")
                .and_then(|(_, v)| v)
                .and_then(|v| v.to_str())
                .expect("libpmix 5's directory")
                .to_owned();
            h.spawn_program(
                &c_client,
                &Proc::new(ns.clone(), local[2]),
                &args,
                &[("LD_LIBRARY_PATH", &dir)],
            )
        },
    ];
    let finished = wait_all(started, Duration::from_secs(120));
    for f in &finished {
        let (who, libpmix) = match f.proc.rank.0 - here {
            0 => ("the pmix-rs client", false),
            1 => ("the libpmix 4.2 client", true),
            _ => ("the libpmix 5.0.11 client", false),
        };
        assert_eq!(lines_of(f), expected(&asked, libpmix), "{who} ({})", f.proc);
    }
}

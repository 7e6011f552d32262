//! The C types of `pmix_capi::ctypes` have the layout of OpenPMIx 4.2's headers: a C program
//! compiled against Debian's headers (`pkg-config --cflags pmix`) prints the size of every type
//! and the offset of every field, and each must equal the Rust side's `size_of`/`offset_of!`.
//! One list below makes both the C program and the Rust numbers.

use std::mem::{offset_of, size_of};
use std::process::Command;

use pmix_capi::ctypes::*;

/// One line the C program prints and the number Rust has for it.
struct Check {
    what: String,
    c_expr: String,
    rust: usize,
}

macro_rules! layout {
    ($($ty:ident { $($field:ident => $cname:literal),* $(,)? })*) => {{
        let mut all = Vec::new();
        $(
            all.push(Check {
                what: stringify!($ty).to_owned(),
                c_expr: format!("sizeof({})", stringify!($ty)),
                rust: size_of::<$ty>(),
            });
            $(
                all.push(Check {
                    what: format!("{}.{}", stringify!($ty), $cname),
                    c_expr: format!("offsetof({}, {})", stringify!($ty), $cname),
                    rust: offset_of!($ty, $field),
                });
            )*
        )*
        all
    }};
}

fn checks() -> Vec<Check> {
    let mut all = layout! {
        pmix_proc_t { nspace => "nspace", rank => "rank" }
        pmix_byte_object_t { bytes => "bytes", size => "size" }
        pmix_envar_t { envar => "envar", value => "value", separator => "separator" }
        pmix_data_array_t { type_ => "type", size => "size", array => "array" }
        pmix_proc_info_t {
            proc_ => "proc", hostname => "hostname", executable_name => "executable_name",
            pid => "pid", exit_code => "exit_code", state => "state",
        }
        pmix_regattr_t { name => "name", string => "string", type_ => "type", description => "description" }
        pmix_value_t { type_ => "type", data => "data" }
        pmix_info_t { key => "key", flags => "flags", value => "value" }
        pmix_pdata_t { proc_ => "proc", key => "key", value => "value" }
        pmix_app_t {
            cmd => "cmd", argv => "argv", env => "env", cwd => "cwd", maxprocs => "maxprocs",
            info => "info", ninfo => "ninfo",
        }
        pmix_query_t { keys => "keys", qualifiers => "qualifiers", nqual => "nqual" }
        pmix_data_buffer_t {
            base_ptr => "base_ptr", pack_ptr => "pack_ptr", unpack_ptr => "unpack_ptr",
            bytes_allocated => "bytes_allocated", bytes_used => "bytes_used",
        }
        pmix_topology_t { source => "source", topology => "topology" }
        pmix_cpuset_t { source => "source", bitmap => "bitmap" }
        pmix_coord_t { view => "view", coord => "coord", dims => "dims" }
        pmix_geometry_t {
            fabric => "fabric", uuid => "uuid", osname => "osname",
            coordinates => "coordinates", ncoords => "ncoords",
        }
        pmix_device_distance_t {
            uuid => "uuid", osname => "osname", type_ => "type", mindist => "mindist",
            maxdist => "maxdist",
        }
        pmix_endpoint_t { uuid => "uuid", osname => "osname", endpt => "endpt" }
        pmix_proc_stats_t {
            node => "node", proc_ => "proc", pid => "pid", cmd => "cmd", state => "state",
            time => "time", percent_cpu => "percent_cpu", priority => "priority",
            num_threads => "num_threads", pss => "pss", vsize => "vsize", rss => "rss",
            peak_vsize => "peak_vsize", processor => "processor", sample_time => "sample_time",
        }
        // The counters lie one after another from the first (the sizes check the rest).
        pmix_disk_stats_t { disk => "disk", counters => "num_reads_completed" }
        pmix_net_stats_t { net_interface => "net_interface", counters => "num_bytes_recvd" }
        pmix_node_stats_t {
            node => "node", loads => "la", sample_time => "sample_time",
            diskstats => "diskstats", ndiskstats => "ndiskstats", netstats => "netstats",
            nnetstats => "nnetstats",
        }
    };
    // The union has no C name of its own.
    all.push(Check {
        what: "pmix_value_t.data (size)".into(),
        c_expr: "sizeof(((pmix_value_t *)0)->data)".into(),
        rust: size_of::<pmix_value_data>(),
    });
    for (name, rust) in [
        ("pmix_status_t", size_of::<pmix_status_t>()),
        ("pmix_rank_t", size_of::<pmix_rank_t>()),
        ("pmix_data_type_t", size_of::<pmix_data_type_t>()),
        ("pmix_scope_t", size_of::<pmix_scope_t>()),
        (
            "pmix_info_directives_t",
            size_of::<pmix_info_directives_t>(),
        ),
        ("pmix_nspace_t", size_of::<pmix_nspace_t>()),
        ("pmix_key_t", size_of::<pmix_key_t>()),
        ("pmix_data_range_t", size_of::<pmix_data_range_t>()),
        ("struct timeval", size_of::<timeval>()),
    ] {
        all.push(Check {
            what: name.into(),
            c_expr: format!("sizeof({name})"),
            rust,
        });
    }
    all
}

#[test]
fn every_type_and_field_is_laid_out_as_in_the_openpmix_4_2_headers() {
    let checks = checks();
    let mut c = String::from(
        "#include <pmix.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <sys/time.h>\n\
         int main(void) {\n",
    );
    for k in &checks {
        c.push_str(&format!(
            "    printf(\"%zu\\n\", (size_t)({}));\n",
            k.c_expr
        ));
    }
    c.push_str("    return 0;\n}\n");

    let dir = std::env::temp_dir().join(format!("pmix-capi-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("layout.c");
    let bin = dir.join("layout");
    std::fs::write(&src, c).expect("writing layout.c");
    let cflags = Command::new("pkg-config")
        .args(["--cflags", "pmix"])
        .output()
        .expect("pkg-config (Debian's libpmix-dev)");
    assert!(
        cflags.status.success(),
        "pkg-config --cflags pmix: {cflags:?}"
    );
    let cflags = String::from_utf8(cflags.stdout).expect("utf-8 flags");
    let cc = Command::new("cc")
        .args(cflags.split_whitespace())
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .expect("running cc");
    assert!(
        cc.status.success(),
        "cc layout.c: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&bin).output().expect("running layout");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let numbers: Vec<usize> = text.lines().map(|l| l.parse().expect("a number")).collect();
    assert_eq!(numbers.len(), checks.len());
    let wrong: Vec<String> = checks
        .iter()
        .zip(&numbers)
        .filter(|(k, c)| k.rust != **c)
        .map(|(k, c)| format!("{}: C {c}, Rust {}", k.what, k.rust))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
}

//! What the test programs in `src/bin` share to write their scenarios: a scenario's result,
//! an error naming the step that failed, and a check that returns instead of panicking (a
//! test program reports a failed check on its output and exits non-zero, so that the test
//! driving it can say which rank failed and why).

use pmix_client::{Nspace, Proc, Rank};

/// The outcome of a scenario step: `Err` carries what went wrong, in words.
pub type Res<T = ()> = Result<T, String>;

/// Turns an error into `"<what>: <error>"`, for `map_err`.
pub fn e<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |err| format!("{what}: {err}")
}

/// Every process of namespace `ns`.
pub fn wildcard(ns: &Nspace) -> Proc {
    Proc::new(ns.clone(), Rank::WILDCARD)
}

/// Returns `Err(format!(...))` from the enclosing function when `cond` is false.
#[macro_export]
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// Runs `run` with the program's arguments and reports as the tests read it: `ok` on stdout
/// and success, or `FAILED: <what>` and failure.
pub fn run_main(run: impl FnOnce(&[String]) -> Res) -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {
            println!("ok");
            std::process::ExitCode::SUCCESS
        }
        Err(msg) => {
            println!("FAILED: {msg}");
            std::process::ExitCode::FAILURE
        }
    }
}

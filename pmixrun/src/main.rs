//! `pmixrun`: the reference launcher, a host built only on the public API of `pmix-server`.

fn main() {
    println!("pmixrun {}", env!("CARGO_PKG_VERSION"));
}

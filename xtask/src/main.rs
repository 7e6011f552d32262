//! Project automation: `cargo xtask gen-attrs`, `conformance`, `bench`, `fuzz`.

fn main() {
    eprintln!("usage: cargo xtask <gen-attrs|conformance|bench|fuzz>");
    std::process::exit(2);
}

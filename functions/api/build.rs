//! The web client's bundle (`web/dist`, built by `npm run build:web`) is embedded into the API
//! binary; rebuild when it changes. A build without it serves a page that says how to build it.
fn main() {
    println!("cargo:rerun-if-changed=../../web/dist");
}

//! Link flags of the binary.

fn main() {
    // Relative relocations packed (DT_RELR, glibc ≥ 2.36): ~12,000 24-byte
    // RELA entries, read by the loader at every start and resident, become a
    // few KiB of bitmaps.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu")
    {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

//! Link `swarm` with its relative relocations packed (`DT_RELR`) where the C library can
//! apply them. A position-independent program carries one 24-byte entry per pointer its
//! data holds (vtables, string tables: 1.7 MB for this one), and the dynamic loader reads
//! every entry at start-up, so all of them stay resident for the life of the hub. Packed,
//! they take a few kilobytes (BENCHMARKS.md, "Memory"). glibc applies packed relocations
//! from 2.36 on, and a program linked with them asks for that version: it is only done
//! when the glibc this is built on has it, for a program that runs where it is built.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target == host && target.ends_with("-linux-gnu") && glibc_has_dt_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the build machine's glibc (`getconf GNU_LIBC_VERSION`: `glibc 2.36`) is 2.36
/// or later.
fn glibc_has_dt_relr() -> bool {
    let Ok(output) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 36),
        _ => false,
    }
}

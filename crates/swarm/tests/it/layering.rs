//! The layering rules of ARCHITECTURE.md ("Invariants, as absences"), read from the
//! crates' manifests: a dependency that breaks one fails here, not in review.

use std::path::PathBuf;

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The names in a crate's `[dependencies]` (not its dev-dependencies).
fn dependencies(krate: &str) -> Vec<String> {
    let path = crates_dir().join(krate).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()));
    let manifest: toml_edit::DocumentMut = text.parse().unwrap();
    manifest
        .get("dependencies")
        .and_then(|deps| deps.as_table_like())
        .map(|deps| deps.iter().map(|(name, _)| name.to_string()).collect())
        .unwrap_or_default()
}

fn all_crates() -> Vec<String> {
    let mut crates: Vec<String> = std::fs::read_dir(crates_dir())
        .unwrap()
        .map_while(Result::ok)
        .filter(|entry| entry.path().join("Cargo.toml").exists())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    crates
}

#[test]
fn only_the_service_and_the_hub_reach_the_store() {
    // swarm-bench is no part of the product: its `--fill` writes a scratch history through the store.
    let allowed = ["swarm-service", "swarm-hub", "swarm-store-sqlite", "swarm-store-postgres", "swarm-bench"];
    for krate in all_crates() {
        let stores: Vec<String> =
            dependencies(&krate).into_iter().filter(|name| name.starts_with("swarm-store")).collect();
        if !stores.is_empty() {
            assert!(
                allowed.contains(&krate.as_str()),
                "{krate} depends on {stores:?}: go through swarm-service"
            );
        }
    }
}

#[test]
fn the_domain_does_no_io() {
    let deps = dependencies("swarm-domain");
    for io in ["tokio", "sqlx", "rusqlite", "reqwest", "axum", "hyper"] {
        assert!(!deps.iter().any(|name| name == io), "swarm-domain depends on {io}");
    }
}

#[test]
fn anyhow_only_in_the_binary_and_the_command_crates() {
    let commands = ["swarm", "swarm-cli", "swarm-connect", "swarm-bench", "swarm-demo"];
    for krate in all_crates() {
        if dependencies(&krate).iter().any(|name| name == "anyhow") {
            assert!(commands.contains(&krate.as_str()), "{krate} uses anyhow: give it a typed error");
        }
    }
}

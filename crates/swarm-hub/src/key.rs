//! The operator key a hub requires: the one it was given (`API_KEY`), or one it generated
//! on first start and keeps in its data directory, or none when the operator insists
//! (`--insecure-no-auth`). A hub with no key could be driven by any web page its user
//! opens, so generating one is the default; see `swarm_domain::local_key` for how local
//! commands find it.

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use crate::{HubError, ServeArgs};

/// Prefix of a generated operator key (an agent token starts with `swt_`).
const KEY_PREFIX: &str = "swk_";

/// The key the hub requires, and where it came from.
#[derive(Debug, Clone)]
pub enum HubKey {
    /// `API_KEY` / `--api-key`.
    Given(String),
    /// Read from, or generated into, `file`.
    Stored { key: String, file: PathBuf, generated: bool },
    /// `--insecure-no-auth`: anyone who reaches the port is the operator.
    None,
}

impl HubKey {
    pub fn key(&self) -> Option<&str> {
        match self {
            HubKey::Given(key) | HubKey::Stored { key, .. } => Some(key),
            HubKey::None => None,
        }
    }
}

/// The key for `args`: given, else stored (generated when its file does not exist yet).
pub fn resolve(args: &ServeArgs) -> Result<HubKey, HubError> {
    if let Some(key) = args.api_key.as_deref().map(str::trim).filter(|key| !key.is_empty()) {
        require_strong(key, "in API_KEY (--api-key)")?;
        return Ok(HubKey::Given(key.to_string()));
    }
    if args.insecure_no_auth {
        return Ok(HubKey::None);
    }
    let file = match (&args.api_key_file, &args.database.database_url) {
        (Some(file), _) => file.clone(),
        (None, Some(_)) => return Err(HubError::PostgresWithoutKey),
        (None, None) => default_key_file(&args.database.db),
    };
    let (key, generated) = read_or_generate(&file)?;
    require_strong(&key, &format!("in {}", file.display()))?;
    Ok(HubKey::Stored { key, file, generated })
}

/// The fewest characters an operator key may have. A generated key has 68.
pub const KEY_MIN_CHARS: usize = 16;

/// Refuses a key short enough to guess (`API_KEY=a` was accepted once).
fn require_strong(key: &str, where_: &str) -> Result<(), HubError> {
    let length = key.chars().count();
    if length < KEY_MIN_CHARS {
        return Err(HubError::WeakKey { where_: where_.to_string(), length, min: KEY_MIN_CHARS });
    }
    Ok(())
}

/// `./swarm.db` keeps its key in `./swarm.db.key`.
pub fn default_key_file(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|name| name.to_os_string()).unwrap_or_else(|| "swarm.db".into());
    name.push(".key");
    db.with_file_name(name)
}

fn read_or_generate(file: &Path) -> Result<(String, bool), HubError> {
    let failed = |source: std::io::Error| HubError::KeyFile { file: file.to_path_buf(), source };
    match read_key(file)? {
        Some(key) => return Ok((key, false)),
        None if file.exists() => {
            return Err(HubError::KeyFileEmpty { file: file.to_path_buf() });
        }
        None => {}
    }
    if let Some(parent) = file.parent().filter(|parent| !parent.as_os_str().is_empty())
        && !parent.exists()
    {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(failed)?;
    }
    let key = new_key().map_err(failed)?;
    // Written whole under a private name, then linked into place: a second hub starting on
    // the same data at the same moment either links first or reads the winner's key.
    let staging = file.with_extension(format!("key.{}.tmp", std::process::id()));
    write_private(&staging, &key).map_err(failed)?;
    let linked = std::fs::hard_link(&staging, file);
    let _ = std::fs::remove_file(&staging);
    match linked {
        Ok(()) => Ok((key, true)),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => match read_key(file)? {
            Some(key) => Ok((key, false)),
            None => Err(HubError::KeyFileEmpty { file: file.to_path_buf() }),
        },
        Err(error) => Err(failed(error)),
    }
}

/// The key in `file`, `None` when it does not exist. A file that others may read is
/// refused: the key in it cannot be trusted to be secret any more.
fn read_key(file: &Path) -> Result<Option<String>, HubError> {
    let metadata = match std::fs::metadata(file) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(HubError::KeyFile { file: file.to_path_buf(), source }),
    };
    let me = rustix::process::geteuid().as_raw();
    if metadata.uid() != me {
        // Another user's file: they chose the key, or can read it whenever they like.
        return Err(HubError::KeyFile {
            file: file.to_path_buf(),
            source: std::io::Error::other(format!(
                "it belongs to user id {}, not to the user running the hub ({me}): its key is not \
                 yours to trust; delete it to generate a new key, or `chown` it if it is yours",
                metadata.uid()
            )),
        });
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(HubError::KeyFileOpen { file: file.to_path_buf(), mode });
    }
    let text = std::fs::read_to_string(file)
        .map_err(|source| HubError::KeyFile { file: file.to_path_buf(), source })?;
    Ok(swarm_domain::local_key::parse_key_file(&text))
}

fn new_key() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(format!("{KEY_PREFIX}{}", hex::encode(bytes)))
}

/// `key` into a new file readable and writable by its owner only.
fn write_private(file: &Path, key: &str) -> std::io::Result<()> {
    let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(file)?;
    out.write_all(format!("{key}\n").as_bytes())?;
    out.sync_all()
}

/// Leaves `key` where this user's local commands look for the hub on `port`
/// (`swarm_domain::local_key`), replacing what an earlier hub on that port left.
pub fn share_with_local_commands(key: &str, port: u16) -> std::io::Result<PathBuf> {
    let file = swarm_domain::local_key::key_file_for_port(port)
        .ok_or_else(|| std::io::Error::other("neither XDG_CONFIG_HOME nor HOME is set"))?;
    let dir = file.parent().expect("a key file has a folder");
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let staging = file.with_extension(format!("key.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    write_private(&staging, key)?;
    std::fs::rename(&staging, &file)?;
    Ok(file)
}

/// The per-port copy of the key while its hub runs: removed when the hub stops (if it
/// still holds this hub's key), so a later listener on that port is not offered it.
/// A hub killed outright leaves it behind: the trust model says so.
pub struct SharedKeyFile {
    file: PathBuf,
    key: String,
}

impl SharedKeyFile {
    pub fn new(file: PathBuf, key: &str) -> SharedKeyFile {
        SharedKeyFile { file, key: key.to_string() }
    }
}

impl Drop for SharedKeyFile {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.file)
            .ok()
            .and_then(|text| swarm_domain::local_key::parse_key_file(&text))
            .is_some_and(|key| key == self.key);
        if ours {
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_sits_beside_the_database() {
        assert_eq!(default_key_file(Path::new("./swarm.db")), PathBuf::from("./swarm.db.key"));
        assert_eq!(
            default_key_file(Path::new("/var/lib/swarm/hub.sqlite")),
            PathBuf::from("/var/lib/swarm/hub.sqlite.key")
        );
    }

    #[test]
    fn a_key_is_generated_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data").join("swarm.db.key");
        let (first, generated) = read_or_generate(&file).unwrap();
        assert!(generated && first.starts_with(KEY_PREFIX) && first.len() == KEY_PREFIX.len() + 64);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, generated) = read_or_generate(&file).unwrap();
        assert_eq!((again.as_str(), generated), (first.as_str(), false));
    }

    #[test]
    fn a_short_key_is_refused() {
        assert!(require_strong("a", "in API_KEY").unwrap_err().to_string().contains("openssl rand -hex 32"));
        assert!(require_strong("fifteen-chars-x", "in API_KEY").is_err());
        assert!(require_strong("sixteen-chars-xx", "in API_KEY").is_ok());
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("swarm.db.key");
        std::fs::write(&file, "swk_exposed\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = read_or_generate(&file).unwrap_err().to_string();
        assert!(error.contains("chmod 600"), "{error}");
    }
}

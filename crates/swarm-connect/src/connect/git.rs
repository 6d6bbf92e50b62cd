//! Files holding a key, and git: `swarm connect` refuses to write a key into a file
//! that git tracks (the next commit would publish it), and asks git to ignore the ones
//! it writes, in the repository's `.git/info/exclude` (local to this clone, never
//! committed). Without git on PATH, or outside a work tree, there is nothing to do.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// Whether git tracks `file` (it is in the index of the work tree it lies in).
pub(super) fn tracked(file: &Path) -> bool {
    let Some((dir, name)) = dir_and_name(file) else { return false };
    quiet(&dir).args(["ls-files", "--error-unmatch", "--"]).arg(name).status().is_ok_and(|s| s.success())
}

/// Adds `/<file's path in its work tree>` to the repository's `info/exclude` unless git
/// ignores it already; the exclude file when a line was added.
pub(super) fn exclude(file: &Path) -> Option<PathBuf> {
    let (dir, name) = dir_and_name(file)?;
    if output(&dir, &["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        return None;
    }
    let ignored = quiet(&dir).args(["check-ignore", "-q", "--no-index", "--"]).arg(&name).status().ok()?;
    if ignored.success() {
        return None;
    }
    let top = PathBuf::from(output(&dir, &["rev-parse", "--show-toplevel"])?);
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    let inside = dir.join(&name);
    let parts: Vec<String> =
        inside.strip_prefix(&top).ok()?.iter().map(|part| glob_escape(&part.to_string_lossy())).collect();
    let exclude = dir.join(output(&dir, &["rev-parse", "--git-path", "info/exclude"])?);
    std::fs::create_dir_all(exclude.parent()?).ok()?;
    let before = std::fs::read_to_string(&exclude).unwrap_or_default();
    let separator = if before.is_empty() || before.ends_with('\n') { "" } else { "\n" };
    let line = format!(
        "{separator}# swarm connect: holds a swarm key, never to be committed\n/{}\n",
        parts.join("/")
    );
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&exclude).ok()?;
    std::io::Write::write_all(&mut out, line.as_bytes()).ok()?;
    Some(exclude)
}

/// The file's real folder and its name (a symlinked file is judged where it points).
fn dir_and_name(file: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let dir = file.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Some((std::fs::canonicalize(dir).ok()?, file.file_name()?.to_os_string()))
}

fn quiet(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    command
}

fn output(dir: &Path, args: &[&str]) -> Option<String> {
    let output = quiet(dir).args(args).stdout(Stdio::piped()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim_end().to_string())
}

/// A file name as a gitignore pattern that matches it literally.
fn glob_escape(name: &str) -> String {
    let mut escaped = String::new();
    for (index, c) in name.chars().enumerate() {
        if matches!(c, '*' | '?' | '[' | '\\') || (index == 0 && matches!(c, '#' | '!')) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

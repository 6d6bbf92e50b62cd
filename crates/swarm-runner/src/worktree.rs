//! A git worktree per task run, so that agents working at the same time in one
//! repository never write over each other's files.
//!
//! Worktrees live in `<repo>/.swarm/worktrees/<short id>`, on a branch
//! `swarm/<short id>-<slug of the task>` made from the repository's `HEAD` when the run
//! starts. Inside the repository because that is where a user looks for them (and
//! where Claude Code keeps its own, `.claude/worktrees`), on the same file system, and
//! gone with the clone; `.swarm/.gitignore` (`*`) keeps them out of the main tree's
//! `git status` without touching the user's own ignore files.
//!
//! A run that leaves its worktree as it found it (same commit, nothing changed) has it
//! removed with its branch; one that changed or committed anything keeps both, and the
//! task records the branch and its last commit. Everything goes through the `git`
//! command line, so that hooks, config and locks are git's own.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use serde_json::json;
use swarm_domain::task::Task;

use crate::{
    RunnerError,
    config::WorktreeMode,
    shipper::{RunKey, Shipper},
    view::View,
    work::Work,
};

/// What opening and closing a run's worktree reports to: the hub (a progress note), the
/// terminal and the run's session log.
pub(crate) struct RunPlace<'a> {
    pub worktrees: Option<&'a Worktrees>,
    pub client: &'a swarm_client::Client,
    pub view: &'a View,
    pub shipper: &'a Shipper,
}

/// Where worktrees go, relative to the repository's top level.
const WORKTREES_DIR: &str = ".swarm/worktrees";
/// What `swarm connect` writes for a project. Often untracked (it may hold an API key),
/// so a fresh checkout lacks it, and the agent CLI would not find the hub.
const CONNECT_FILES: &[&str] = &[
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".codex/config.toml",
    ".pi/extensions/agent-swarm.ts",
    ".gemini/settings.json",
];
const CONNECT_DIRS: &[&str] = &[".claude/commands", ".pi/prompts"];
/// Slug words kept from the task's text for the branch name.
const SLUG_CHARS: usize = 40;

/// The runner's repository, when task runs get worktrees.
#[derive(Debug)]
pub(crate) struct Worktrees {
    /// The main tree's top level.
    repo: PathBuf,
    /// The runner's directory inside it: agents run in the same place in their worktree.
    prefix: PathBuf,
    source: PathBuf,
    /// Git refuses concurrent ref and worktree updates with lock errors; runs take turns.
    lock: tokio::sync::Mutex<()>,
}

/// One run's worktree.
#[derive(Debug)]
pub(crate) struct Worktree {
    pub path: PathBuf,
    /// Where the agent CLI runs: the runner's own directory, inside the worktree.
    pub cwd: PathBuf,
    pub branch: String,
    base: String,
    /// Found from an earlier run of the task (paused, or kept with changes): never removed.
    reused: bool,
    /// Files copied in from the main tree, which do not count as changes.
    copied: Vec<String>,
}

/// What became of a worktree after its run.
#[derive(Debug, PartialEq)]
pub(crate) enum Closed {
    Removed,
    Kept { branch: String, commit: String, new_commits: u64, uncommitted: usize },
}

impl Worktrees {
    /// The repository `dir` is in, when `mode` and the concurrency call for worktrees;
    /// `None` when runs share `dir`.
    pub async fn for_runner(
        mode: WorktreeMode,
        max_concurrent: u32,
        dir: &Path,
    ) -> Result<Option<Worktrees>, RunnerError> {
        let wanted = match mode {
            WorktreeMode::Off => return Ok(None),
            WorktreeMode::On => true,
            WorktreeMode::Auto => max_concurrent > 1,
        };
        if !wanted {
            return Ok(None);
        }
        let forced = mode == WorktreeMode::On;
        let refuse = |why: String| {
            RunnerError::InvalidConfig(format!("--worktree (WORKTREE=1): {why}; or pass --no-worktree"))
        };
        let top = match git(dir, &["rev-parse", "--show-toplevel"]).await {
            Ok(top) => PathBuf::from(top),
            // Outside a repository nothing changes, unless a worktree was asked for.
            Err(err) if forced => {
                return Err(refuse(format!("{} is not in a git repository ({err})", dir.display())));
            }
            Err(_) => return Ok(None),
        };
        if let Err(err) = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).await {
            let why = format!("the repository at {} has no commit yet to branch from ({err})", top.display());
            if forced {
                return Err(refuse(why));
            }
            tracing::warn!("{why}: task runs share the directory");
            return Ok(None);
        }
        let prefix = git(dir, &["rev-parse", "--show-prefix"]).await.map_err(refuse)?;
        Ok(Some(Worktrees {
            repo: top,
            prefix: PathBuf::from(prefix),
            source: dir.to_path_buf(),
            lock: tokio::sync::Mutex::new(()),
        }))
    }

    pub fn dir(&self) -> PathBuf {
        self.repo.join(WORKTREES_DIR)
    }

    /// The worktree for a run of `task`: the one an earlier run kept, or a new one on a
    /// new branch from `HEAD`.
    pub async fn open(&self, task: &Task) -> Result<Worktree, String> {
        let _turn = self.lock.lock().await;
        let name = short_id(task);
        let path = self.dir().join(&name);
        let mut branch = match slug(&task.task) {
            slug if slug.is_empty() => format!("swarm/{name}"),
            slug => format!("swarm/{name}-{slug}"),
        };
        ignore_all(&self.repo.join(".swarm"))
            .map_err(|err| format!("cannot write .swarm/.gitignore: {err}"))?;
        let reused = if path.join(".git").exists() {
            branch = git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]).await?;
            true
        } else {
            // A worktree deleted by hand is still registered and blocks its path.
            git(&self.repo, &["worktree", "prune"]).await?;
            let target = path.to_string_lossy();
            let branch_ref = format!("refs/heads/{branch}");
            if git(&self.repo, &["rev-parse", "--verify", "--quiet", &branch_ref]).await.is_ok() {
                git(&self.repo, &["worktree", "add", "--quiet", &target, &branch]).await?;
                true
            } else {
                git(&self.repo, &["worktree", "add", "--quiet", "-b", &branch, &target, "HEAD"]).await?;
                false
            }
        };
        let base = git(&path, &["rev-parse", "HEAD"]).await?;
        let cwd = path.join(&self.prefix);
        let copied = copy_connect_files(&self.source, &cwd, &self.prefix)
            .map_err(|err| format!("cannot copy the `swarm connect` files into {}: {err}", cwd.display()))?;
        Ok(Worktree { path, cwd, branch, base, reused, copied })
    }

    /// Removes a worktree its run left as it found it, with its branch; keeps any other.
    pub async fn close(&self, worktree: &Worktree) -> Result<Closed, String> {
        let path = &worktree.path;
        let commit = git(path, &["rev-parse", "HEAD"]).await?;
        let status = git(path, &["status", "--porcelain", "--untracked-files=all"]).await?;
        let uncommitted = status
            .lines()
            .filter(|line| {
                line.get(3..).is_some_and(|file| !worktree.copied.iter().any(|copied| copied == file))
            })
            .count();
        if !worktree.reused && commit == worktree.base && uncommitted == 0 {
            let _turn = self.lock.lock().await;
            // `--force`: the copied files are untracked.
            git(&self.repo, &["worktree", "remove", "--force", &path.to_string_lossy()]).await?;
            git(&self.repo, &["branch", "-D", &worktree.branch]).await?;
            return Ok(Closed::Removed);
        }
        let branch = git(path, &["rev-parse", "--abbrev-ref", "HEAD"]).await?;
        let range = format!("{}..HEAD", worktree.base);
        let new_commits = git(path, &["rev-list", "--count", &range]).await?.parse().unwrap_or(0);
        Ok(Closed::Kept { branch, commit, new_commits, uncommitted })
    }
}

/// Whether a run gets a worktree: one about a task the agent works on. Runs of a trigger
/// conversation stay in the repository, because Claude Code finds a session to resume
/// by its directory; offers are only reviewed.
pub(crate) fn wanted(work: &Work) -> Option<&Task> {
    match work {
        Work::Task { task, .. } | Work::Resume { task } if work.session().is_none() => Some(task),
        _ => None,
    }
}

/// Opens the run's worktree and says so on the terminal and on the task (a progress
/// note, while the task still takes one: the agent may finish it before it exits).
pub(crate) async fn enter(to: &RunPlace<'_>, work: &Work, label: &str) -> Result<Option<Worktree>, String> {
    let (Some(worktrees), Some(task)) = (to.worktrees, wanted(work)) else {
        return Ok(None);
    };
    let worktree = worktrees
        .open(task)
        .await
        .map_err(|err| format!("cannot make a git worktree for the run: {err}; or pass --no-worktree"))?;
    let from = if worktree.reused { "an earlier run's, kept" } else { "new, from HEAD" };
    let where_ = format!(
        "git worktree {} on branch {} ({from}, at {})",
        worktree.path.display(),
        worktree.branch,
        short_sha(&worktree.base)
    );
    to.view.info(
        "worktree",
        &format!("▸ {label}: in {where_}"),
        &[("path", json!(worktree.path)), ("branch", json!(worktree.branch))],
    );
    if let Err(err) = to.client.store_progress(task.id, &format!("runner: working in {where_}")).await {
        to.view.warn(
            "progress_failed",
            &format!("{label}: cannot note its worktree on the task: {err}"),
            &[],
        );
    }
    Ok(Some(worktree))
}

/// After the run: removes a clean worktree, or keeps it and records the branch and last
/// commit on the task, as a progress note when the task still takes one and in every
/// case as a line of the task's session log (`{"type": "swarm_worktree", ...}`).
pub(crate) async fn leave(to: &RunPlace<'_>, worktree: Worktree, work: &Work, key: &RunKey, label: &str) {
    let Some(worktrees) = to.worktrees else { return };
    let path = worktree.path.display().to_string();
    let closed = match worktrees.close(&worktree).await {
        Ok(closed) => closed,
        Err(err) => {
            to.view.warn(
                "worktree_failed",
                &format!("{label}: cannot tidy its worktree {path}: {err}; it is left as it is"),
                &[("path", json!(path))],
            );
            return;
        }
    };
    let record = match &closed {
        Closed::Removed => {
            to.view.info(
                "worktree_removed",
                &format!("{label}: its worktree had no changes; removed it and branch {}", worktree.branch),
                &[("branch", json!(worktree.branch))],
            );
            json!({"type": "swarm_worktree", "kept": false, "branch": worktree.branch, "path": path})
        }
        Closed::Kept { branch, commit, new_commits, uncommitted } => {
            let message = format!(
                "kept git worktree {path}: branch {branch}, last commit {commit} ({new_commits} new commit(s), \
                 {uncommitted} uncommitted change(s))"
            );
            to.view.info(
                "worktree_kept",
                &format!("{label}: {message}. Merge the branch, then `git worktree remove {path} && git branch -D {branch}`"),
                &[("path", json!(path)), ("branch", json!(branch)), ("commit", json!(commit))],
            );
            if let Some(task) = wanted(work) {
                // Refused once the agent has finished the task; the session log has it anyway.
                let _ = to.client.store_progress(task.id, &format!("runner: {message}")).await;
            }
            json!({
                "type": "swarm_worktree", "kept": true, "path": path, "branch": branch, "commit": commit,
                "newCommits": new_commits, "uncommitted": uncommitted,
            })
        }
    };
    to.shipper.line(key, &record.to_string());
}

/// The last 12 hex digits of the task id: the random part of a UUID v7, whose first
/// digits are a timestamp that tasks created together share.
fn short_id(task: &Task) -> String {
    let hex = task.id.to_string().replace('-', "");
    hex[hex.len().saturating_sub(12)..].to_string()
}

fn short_sha(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// Lowercase words of `text`, joined by `-`, at most [`SLUG_CHARS`] long: a valid
/// branch-name component.
fn slug(text: &str) -> String {
    let mut slug = String::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|word| !word.is_empty()) {
        let word = word.to_ascii_lowercase();
        let extra = if slug.is_empty() { word.len() } else { word.len() + 1 };
        if slug.len() + extra > SLUG_CHARS {
            if slug.is_empty() {
                slug.push_str(&word[..SLUG_CHARS]);
            }
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    slug
}

/// `dir/.gitignore` with `*`: the folder ignores itself, user's ignore files untouched.
fn ignore_all(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join(".gitignore");
    if !file.exists() {
        std::fs::write(file, "# swarm's git worktrees: not part of the project\n*\n")?;
    }
    Ok(())
}

/// Copies what `swarm connect` wrote in `from` into `to` where the checkout lacks it;
/// the copied files, relative to the worktree's top level (as `git status` names them).
fn copy_connect_files(from: &Path, to: &Path, prefix: &Path) -> std::io::Result<Vec<String>> {
    let mut files: Vec<String> = CONNECT_FILES.iter().map(|file| file.to_string()).collect();
    for dir in CONNECT_DIRS {
        if let Ok(entries) = std::fs::read_dir(from.join(dir)) {
            for entry in entries.map_while(Result::ok).filter(|entry| entry.path().is_file()) {
                files.push(format!("{dir}/{}", entry.file_name().to_string_lossy()));
            }
        }
    }
    let mut copied = Vec::new();
    for file in files {
        let (source, target) = (from.join(&file), to.join(&file));
        if !source.is_file() || target.exists() {
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&source, &target)?;
        copied.push(prefix.join(&file).to_string_lossy().into_owned());
    }
    Ok(copied)
}

/// `git -C dir <args>`: its trimmed standard output, or what it said on failure.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = tokio::process::Command::new("git");
    command.arg("-C").arg(dir).args(args).stdin(Stdio::null()).kill_on_drop(true);
    // Set by a git hook that started the runner; they would point every call at one tree.
    for name in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"] {
        command.env_remove(name);
    }
    let output = command.output().await.map_err(|err| format!("cannot run git: {err}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).trim().to_string());
    }
    let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
    Err(format!("`git {}` failed ({}): {said}", args.join(" "), output.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) -> String {
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        run(dir.path(), &["init", "--quiet", "--initial-branch", "main"]);
        std::fs::write(dir.path().join("notes.txt"), "original\n").unwrap();
        run(dir.path(), &["add", "notes.txt"]);
        run(dir.path(), &["commit", "--quiet", "-m", "first"]);
        dir
    }

    fn task(id: &str, text: &str) -> Task {
        serde_json::from_value(json!({
            "id": id, "agentId": null, "creatorAgentId": null, "task": text, "status": "in_progress",
            "source": "api", "taskType": null, "tags": [], "priority": 50, "dependsOn": [], "offeredTo": null,
            "offeredAt": null, "acceptedAt": null, "rejectionReason": null,
            "createdAt": "2026-01-20T10:00:00.000Z", "lastUpdatedAt": "2026-01-20T10:00:00.000Z",
            "finishedAt": null, "failureReason": null, "output": null, "progress": null, "notifiedAt": null,
            "leaseExpiresAt": null, "leaseLosses": 0
        }))
        .unwrap()
    }

    const ID: &str = "0199aaaa-bbbb-7ccc-8ddd-0123456789ab";

    #[test]
    fn branch_names_are_the_random_end_of_the_id_and_a_slug() {
        assert_eq!(short_id(&task(ID, "x")), "0123456789ab");
        assert_eq!(slug("Fix the flaky test (again)!"), "fix-the-flaky-test-again");
        assert_eq!(slug("ünïcode ~^: only"), "n-code-only");
        assert_eq!(slug("a".repeat(60).as_str()).len(), SLUG_CHARS);
        assert_eq!(slug("--"), "");
    }

    #[tokio::test]
    async fn outside_a_repository_or_at_one_run_at_a_time_runs_share_the_directory() {
        let plain = tempfile::tempdir().unwrap();
        assert!(Worktrees::for_runner(WorktreeMode::Auto, 3, plain.path()).await.unwrap().is_none());
        let err = Worktrees::for_runner(WorktreeMode::On, 1, plain.path()).await.unwrap_err();
        assert!(err.to_string().contains("not in a git repository"), "{err}");
        let repo = repo();
        assert!(Worktrees::for_runner(WorktreeMode::Auto, 1, repo.path()).await.unwrap().is_none());
        assert!(Worktrees::for_runner(WorktreeMode::Off, 3, repo.path()).await.unwrap().is_none());
        assert!(Worktrees::for_runner(WorktreeMode::On, 1, repo.path()).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_clean_run_leaves_nothing_and_a_changed_one_keeps_its_branch() {
        let repo = repo();
        std::fs::write(repo.path().join(".mcp.json"), "{}").unwrap();
        let worktrees = Worktrees::for_runner(WorktreeMode::Auto, 2, repo.path()).await.unwrap().unwrap();
        let clean = worktrees.open(&task(ID, "Look around")).await.unwrap();
        assert!(clean.cwd.join(".mcp.json").exists(), "swarm connect's files come along");
        assert_eq!(clean.branch, "swarm/0123456789ab-look-around");
        assert_eq!(worktrees.close(&clean).await.unwrap(), Closed::Removed);
        assert!(!clean.path.exists());
        assert_eq!(run(repo.path(), &["branch", "--list", "swarm/*"]), "");

        let other = "0199aaaa-bbbb-7ccc-8ddd-ba9876543210";
        let changed = worktrees.open(&task(other, "Edit notes")).await.unwrap();
        std::fs::write(changed.cwd.join("notes.txt"), "edited\n").unwrap();
        run(&changed.path, &["commit", "--quiet", "-am", "edit"]);
        std::fs::write(changed.cwd.join("new.txt"), "more\n").unwrap();
        let Closed::Kept { branch, commit, new_commits, uncommitted } =
            worktrees.close(&changed).await.unwrap()
        else {
            panic!("a changed worktree is kept")
        };
        assert_eq!((branch.as_str(), new_commits, uncommitted), ("swarm/ba9876543210-edit-notes", 1, 1));
        assert_eq!(commit, run(repo.path(), &["rev-parse", &branch]));
        assert_eq!(std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(), "original\n");
        assert_eq!(run(repo.path(), &["status", "--porcelain"]), "?? .mcp.json", "worktrees are ignored");

        // The next run of the task (resumed after a pause) continues there, and keeps it.
        let again = worktrees.open(&task(other, "Edit notes")).await.unwrap();
        assert_eq!((again.path.as_path(), again.reused), (changed.path.as_path(), true));
        assert!(matches!(worktrees.close(&again).await.unwrap(), Closed::Kept { .. }));
    }
}

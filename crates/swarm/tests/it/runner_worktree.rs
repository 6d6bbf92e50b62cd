//! Runs at once in one git repository, each in a worktree of its own: agents editing the
//! same file never overwrite each other, what they leave is kept on a named branch, and
//! a run that changed nothing leaves nothing behind. Real git, real repositories, shell
//! scripts as agents that then report through the stand-in.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use serde_json::{Value, json};

use crate::{
    hub::{Hub, SWARM, sqlite_file},
    runner::{Runner, RunnerSetup, create, eventually, task_in},
    runner_env::script,
};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// A repository with one commit: `notes.txt` says "original".
fn repo(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch", "main"]);
    std::fs::write(repo.join("notes.txt"), "original\n").unwrap();
    git(&repo, &["add", "notes.txt"]);
    git(&repo, &["commit", "--quiet", "-m", "first"]);
    repo
}

/// An agent that does what `plan/<TASK_ID>` says (`commit`, `edit` or `nothing`) to
/// `notes.txt` in its working directory, once `runs` runs have started (so they overlap),
/// then reports through the stand-in.
fn planned_agent(dir: &Path, runs: usize) -> String {
    let plan = dir.join("plan");
    std::fs::create_dir_all(&plan).unwrap();
    let body = format!(
        r#"plan='{plan}'
pwd > "$plan/$TASK_ID.cwd"
touch "$plan/$TASK_ID.started"
tries=0
while [ "$(ls "$plan" | grep -c '\.started$')" -lt {runs} ]; do
  tries=$((tries + 1))
  [ $tries -gt 1200 ] && {{ echo 'the other runs never started alongside' >&2; exit 1; }}
  sleep 0.05
done
case "$(cat "$plan/$TASK_ID")" in
  commit) echo "$TASK_ID" > notes.txt && git add notes.txt && git -c user.name=agent -c user.email=agent@example.com commit -qm "$TASK_ID" || exit 1 ;;
  edit) echo "$TASK_ID" > notes.txt ;;
esac
exec '{SWARM}' "$@""#,
        plan = plan.display(),
    );
    script(dir, "planned-agent.sh", &body)
}

/// Registers the agent and gives it `tasks` (text, plan) before its runner starts, so
/// that they are all there for its first polls.
async fn assign(hub: &Hub, dir: &Path, agent_id: &str, tasks: &[(&str, &str)]) -> Vec<String> {
    let (status, body) =
        hub.post("/api/agents", Some(agent_id), json!({"name": "editor", "maxTasks": 4})).await;
    assert_eq!(status, 201, "{body}");
    let mut ids = Vec::new();
    for (text, plan) in tasks {
        let id = create(hub, json!({"task": text, "agentId": agent_id})).await;
        std::fs::write(dir.join("plan").join(&id), plan).unwrap();
        ids.push(id);
    }
    ids
}

fn branches(repo: &Path) -> BTreeSet<String> {
    git(repo, &["branch", "--list", "swarm/*", "--format=%(refname:short)"])
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn concurrent_runs_each_work_in_their_own_worktree_and_only_changed_ones_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent = planned_agent(dir.path(), 4);
    let setup = RunnerSetup { harness_cmd: Some(agent), cwd: Some(&repo), ..RunnerSetup::worker(dir.path()) }
        .env("MAX_CONCURRENT_TASKS", "4");
    let plans = [
        ("Fix the parser", "commit"),
        ("Tune the lexer", "commit"),
        ("Write the docs", "edit"),
        ("Just look around", "nothing"),
    ];
    let ids = assign(&hub, dir.path(), &setup.agent_id, &plans).await;
    let runner = Runner::start(&hub, setup);
    for id in &ids {
        let done = task_in(&hub, id, &["completed", "failed", "unassigned"]).await;
        assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());
    }
    let worktrees = repo.join(".swarm/worktrees");
    let kept = eventually("the look-around run's worktree and branch to be gone", || async {
        let kept: BTreeMap<String, String> = std::fs::read_dir(&worktrees)
            .ok()?
            .map_while(Result::ok)
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = ids.iter().find(|id| id.replace('-', "").ends_with(&name)).unwrap().clone();
                (id, name)
            })
            .collect();
        // Its worktree goes first, then its branch.
        (kept.len() == 3 && branches(&repo).len() == 3).then_some(kept)
    })
    .await;

    // Each run had a directory of its own, and none wrote over another's file.
    let cwds: BTreeSet<String> = ids
        .iter()
        .map(|id| std::fs::read_to_string(dir.path().join("plan").join(format!("{id}.cwd"))).unwrap())
        .collect();
    assert_eq!(cwds.len(), 4, "{cwds:?}");
    assert!(cwds.iter().all(|cwd| cwd.contains(".swarm/worktrees/")), "{cwds:?}");
    let (commits, edit, nothing) = (&ids[..2], &ids[2], &ids[3]);
    assert!(!kept.contains_key(nothing), "a run that changed nothing leaves no worktree: {kept:?}");
    let named = branches(&repo);
    assert_eq!(named.len(), 3, "{named:?}");
    for (id, (text, _)) in ids.iter().zip(plans) {
        let short = &id.replace('-', "")[20..];
        let slug = text.to_lowercase().replace(' ', "-");
        let branch = format!("swarm/{short}-{slug}");
        assert_eq!(named.contains(&branch), id != nothing, "{branch} in {named:?}");
    }
    for id in commits {
        let path = worktrees.join(&kept[id]);
        let branch = git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]);
        assert_eq!(
            git(&repo, &["show", &format!("{branch}:notes.txt")]),
            *id,
            "its commit holds its own edit"
        );
        assert_eq!(git(&repo, &["rev-list", "--count", &format!("{head}..{branch}")]), "1");
    }
    let edited = worktrees.join(&kept[edit]);
    assert_eq!(std::fs::read_to_string(edited.join("notes.txt")).unwrap().trim(), edit.as_str());

    // The main tree is as it was; the worktrees do not show in its status.
    assert_eq!(std::fs::read_to_string(repo.join("notes.txt")).unwrap(), "original\n");
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    // The task records where its work is: the branch on the task's progress while it
    // runs, the branch and last commit in its session log.
    let id = &commits[0];
    let path = worktrees.join(&kept[id]);
    let branch = git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]);
    let commit = git(&repo, &["rev-parse", &branch]);
    let record = eventually("the kept worktree in the task's session log", || async {
        let (_, body) = hub.get(&format!("/api/tasks/{id}/session-logs"), None).await;
        body["logs"].as_array()?.iter().find_map(|log| {
            let line: Value = serde_json::from_str(log["content"].as_str()?).ok()?;
            (line["type"] == "swarm_worktree").then_some(line)
        })
    })
    .await;
    assert_eq!(record["kept"], true, "{record}");
    assert_eq!(
        (record["branch"].as_str(), record["commit"].as_str()),
        (Some(branch.as_str()), Some(commit.as_str()))
    );
    let (_, task) = hub.get(&format!("/api/tasks/{id}"), None).await;
    let noted = task["logs"].as_array().unwrap().iter().any(|event| {
        event["newValue"].as_str().is_some_and(|value| value.contains(&branch) && value.contains("worktree"))
    });
    assert!(noted, "the branch is noted on the task: {task}");
    let output = runner.output();
    assert!(output.contains("kept git worktree") && output.contains(&commit), "{output}");
}

#[tokio::test]
async fn with_no_worktree_concurrent_runs_work_in_the_repository_itself() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let hub = Hub::start(&sqlite_file(dir.path()), None);
    let agent = planned_agent(dir.path(), 1);
    let mut setup =
        RunnerSetup { harness_cmd: Some(agent), cwd: Some(&repo), ..RunnerSetup::worker(dir.path()) }
            .env("MAX_CONCURRENT_TASKS", "2");
    setup.flags.push("--no-worktree");
    let ids = assign(&hub, dir.path(), &setup.agent_id, &[("Write the docs", "edit")]).await;
    let runner = Runner::start(&hub, setup);
    let done = task_in(&hub, &ids[0], &["completed", "failed", "unassigned"]).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());

    let cwd = std::fs::read_to_string(dir.path().join("plan").join(format!("{}.cwd", ids[0]))).unwrap();
    assert_eq!(Path::new(cwd.trim()).canonicalize().unwrap(), repo.canonicalize().unwrap());
    assert_eq!(std::fs::read_to_string(repo.join("notes.txt")).unwrap().trim(), ids[0]);
    assert!(!repo.join(".swarm").exists());
    assert_eq!(branches(&repo), BTreeSet::new());
}

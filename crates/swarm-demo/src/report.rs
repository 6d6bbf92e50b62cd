//! What the demo prints on stdout: the story line by line as it happens, then a summary
//! of the tasks and agent runs. Text for people, or one JSON object per line (`--json`).

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::{Value, json};
use swarm_domain::{id::AgentId, task::Task};

use super::{
    narrator::{Line, quote},
    story::Route,
};

/// One task in the summary.
pub(super) struct Row<'a> {
    pub route: Route,
    pub task: &'a Task,
    /// Who did it (its assignee), by name.
    pub agent: String,
}

pub(super) struct Summary<'a> {
    pub rows: Vec<Row<'a>>,
    /// Agent runs started, by agent name.
    pub runs: BTreeMap<String, usize>,
    pub problems: Vec<String>,
    pub elapsed: Duration,
    /// Where the demo's folder was kept (`--keep`).
    pub kept: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Report {
    json: bool,
}

impl Report {
    pub fn new(json: bool) -> Report {
        Report { json }
    }

    pub fn header(&self, hub_url: &str, dir: &Path) {
        if self.json {
            print_line(json!({"event": "demo_started", "hub": hub_url, "dir": dir}));
            return;
        }
        print_line(
            "swarm demo: a hub, a lead and two workers. Each agent is a real runner whose agent CLI is a \
             scripted stand-in (no LLM, no network).",
        );
        print_line(format!("hub: {hub_url} (SQLite in {})", dir.display()));
        print_line("");
    }

    /// Something the demo itself does (not the crew).
    pub fn note(&self, at: Duration, message: &str) {
        if self.json {
            print_line(json!({"at": seconds(at), "event": "demo", "message": message}));
        } else {
            print_line(format!("{:>7}  · {message}", elapsed_text(at)));
        }
    }

    pub fn line(&self, line: &Line) {
        if self.json {
            print_line(json!({
                "at": seconds(line.at), "event": line.event, "taskId": line.task_id, "agent": line.agent,
                "message": line.message,
            }));
        } else {
            print_line(format!("{:>7}  {}", elapsed_text(line.at), line.message));
        }
    }

    pub fn summary(&self, summary: &Summary<'_>) {
        let n_runs: usize = summary.runs.values().sum();
        if self.json {
            let tasks: Vec<Value> = summary
                .rows
                .iter()
                .map(|row| {
                    json!({
                        "route": row.route.as_str(), "taskId": row.task.id, "task": row.task.task,
                        "status": row.task.status.as_str(), "agent": row.agent,
                        "seconds": took(row.task).map(seconds), "output": row.task.output,
                        "failureReason": row.task.failure_reason,
                    })
                })
                .collect();
            print_line(json!({
                "event": "summary", "ok": summary.problems.is_empty(), "problems": summary.problems,
                "seconds": seconds(summary.elapsed), "tasks": tasks,
                "agentRuns": {"total": n_runs, "byAgent": summary.runs}, "kept": summary.kept,
            }));
            return;
        }
        print_line("");
        print_line(format!("  {:<10} {:<11} {:<9} {:>6}  task", "route", "status", "by", "took"));
        for row in &summary.rows {
            let took = took(row.task).map(duration_text).unwrap_or_default();
            let why = match &row.task.failure_reason {
                Some(reason) => format!(": {reason}"),
                None => String::new(),
            };
            print_line(format!(
                "  {:<10} {:<11} {:<9} {:>6}  {}{why}",
                row.route.as_str(),
                row.task.status.as_str(),
                row.agent,
                took,
                quote(&row.task.task),
            ));
        }
        let by_agent: Vec<String> = summary.runs.iter().map(|(name, n)| format!("{name} {n}")).collect();
        print_line(format!("agent runs started: {n_runs} ({})", by_agent.join(", ")));
        if let Some(dir) = &summary.kept {
            print_line(format!(
                "kept {}: the database (swarm.db: `swarm serve --db {}` to look around) and the runners' \
                 logs (logs/)",
                dir.display(),
                dir.join("swarm.db").display(),
            ));
        }
        if summary.problems.is_empty() {
            print_line(format!(
                "every task ended as scripted, in {}: an offer accepted and done, pool work claimed, \
                 one task delegated by the lead, one failure with its reason",
                duration_text(summary.elapsed)
            ));
        } else {
            print_line("the demo did not go as scripted:");
            for problem in &summary.problems {
                print_line(format!("  - {problem}"));
            }
        }
    }
}

/// Agent runs started, by agent: each run of the stand-in left a `<pid>.start` file in
/// `runs_dir` naming its agent.
pub(super) fn count_runs(runs_dir: &Path) -> BTreeMap<AgentId, usize> {
    let mut runs = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return runs;
    };
    for path in entries.map_while(Result::ok).map(|entry| entry.path()) {
        if path.extension().is_none_or(|extension| extension != "start") {
            continue;
        }
        let record: Option<Value> =
            std::fs::read_to_string(&path).ok().and_then(|text| serde_json::from_str(&text).ok());
        let agent = record
            .as_ref()
            .and_then(|record| record["agentId"].as_str())
            .and_then(|id| AgentId::parse(id).ok());
        if let Some(agent) = agent {
            *runs.entry(agent).or_default() += 1;
        }
    }
    runs
}

/// From creation to the end.
fn took(task: &Task) -> Option<Duration> {
    let millis = task.finished_at?.unix_millis() - task.created_at.unix_millis();
    Some(Duration::from_millis(u64::try_from(millis).unwrap_or(0)))
}

/// A moment, from the demo's start.
fn elapsed_text(at: Duration) -> String {
    format!("+{}", duration_text(at))
}

fn duration_text(duration: Duration) -> String {
    format!("{:.1}s", duration.as_secs_f64())
}

fn seconds(at: Duration) -> f64 {
    (at.as_millis() as f64) / 1000.0
}

/// One write per line; a closed stdout (`swarm demo | head`) is not an error worth dying of.
fn print_line(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

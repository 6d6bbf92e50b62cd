//! Killing a runner as a crash would, and making sure nothing it started lives on.
//!
//! The kernel kills a runner's agent CLI with it (its parent-death signal), but not what
//! the CLI started in turn: MCP servers and hooks in the CLI's process group, tool calls in
//! groups of their own. A test whose runner "stays dead" kills all of them, so that no
//! part of the dead run finishes the task behind the test's back.

use std::process::Command;

use super::eventually;

/// `pid`'s parent and process group, from `/proc/<pid>/stat`.
fn parent_and_group(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`: the command may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(1);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Every process descended from `pid`, as `/proc` shows them now.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Some((parent, _)) = parent_and_group(child) {
            parents.push((child, parent));
        }
    }
    let mut found = Vec::new();
    let mut pending = vec![pid];
    while let Some(parent) = pending.pop() {
        for (child, _) in parents.iter().filter(|(_, of)| *of == parent) {
            if !found.contains(child) {
                found.push(*child);
                pending.push(*child);
            }
        }
    }
    found
}

fn sigkill(target: &str) {
    let _ = Command::new("kill").args(["-KILL", "--", target]).status();
}

/// SIGKILL for the runner `runner_pid` and every process it started, their process
/// groups included (the runner's children first found, while they still are its); returns
/// the pids of what the runner had started, once all of them are gone. The caller still
/// reaps the runner itself.
pub async fn kill_run(runner_pid: u32) -> Vec<u32> {
    let started = descendants(runner_pid);
    let own_group = parent_and_group(std::process::id()).map(|(_, group)| group);
    let mut groups: Vec<u32> = started
        .iter()
        .filter_map(|&pid| parent_and_group(pid))
        .map(|(_, group)| group)
        .filter(|group| Some(*group) != own_group)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    sigkill(&runner_pid.to_string());
    for group in groups {
        sigkill(&format!("-{group}"));
    }
    for pid in &started {
        sigkill(&pid.to_string());
    }
    eventually("the dead runner's processes to be gone", || async {
        started.iter().all(|&pid| !crate::runner::is_alive(u64::from(pid))).then_some(())
    })
    .await;
    started
}

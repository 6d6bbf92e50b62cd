//! Agent CLI processes: each in its own process group, so that the runner (not the
//! terminal's Ctrl-C) decides when an agent stops, and stopping it takes its own child
//! processes (tool calls, MCP servers) along.

use std::{fmt, process::ExitStatus};

/// How an agent run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildExit {
    Code(i32),
    Signal(i32),
}

impl ChildExit {
    pub fn from_status(status: ExitStatus) -> ChildExit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ChildExit::Code(code),
            (None, Some(signal)) => ChildExit::Signal(signal),
            // Neither is possible on Unix for an exited process; treat it as a failure.
            (None, None) => ChildExit::Code(-1),
        }
    }

    pub fn success(&self) -> bool {
        *self == ChildExit::Code(0)
    }

    /// The number `errors.jsonl` records: the exit code, or 128 + signal like a shell.
    pub fn code(&self) -> i32 {
        match self {
            ChildExit::Code(code) => *code,
            ChildExit::Signal(signal) => 128 + signal,
        }
    }
}

impl fmt::Display for ChildExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildExit::Code(code) => write!(f, "exit code {code}"),
            ChildExit::Signal(signal) => write!(f, "signal {signal}"),
        }
    }
}

/// Puts the child in a process group of its own and, on Linux, has the kernel kill it
/// when the runner dies (SIGKILL included), so no agent outlives its runner and keeps
/// working on a task the hub has handed to someone else. (Linux sends the signal when
/// the *thread* that spawned the child ends; tokio's worker threads live as long as the
/// runtime, and the children are spawned from them.)
pub(crate) fn detach_and_bind(command: &mut tokio::process::Command) {
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let runner_pid = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the forked child before exec; it allocates nothing,
        // takes no lock and makes only async-signal-safe calls (prctl, getppid, _exit), as
        // `pre_exec` requires.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The runner died between fork and prctl: nobody would stop this agent.
                if libc::getppid() != runner_pid {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}

/// Sends `signal` to the agent's whole process group. Errors are ignored: the group may
/// already be gone.
pub(crate) fn signal_group(pid: u32, signal: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid > 0 {
        // SAFETY: kill has no memory-safety preconditions; a negative pid names a group.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// Every process descended from `pid` (children, their children, ...), as `/proc` shows them
/// now. A CLI may start its tools in process groups of their own (Claude Code's shell tool
/// does), out of reach of [`signal_group`]; once the CLI is gone they belong to init and
/// nothing links them to the run any more, so they are found while it still runs.
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.map_while(Result::ok) {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        if let Some(parent) = rest.split_whitespace().nth(1).and_then(|ppid| ppid.parse().ok()) {
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

/// Sends `signal` to the agent's process group, and to each of `others` and its own group.
pub(crate) fn signal_tree(pid: u32, others: &[u32], signal: i32) {
    signal_group(pid, signal);
    for other in others {
        signal_group(*other, signal);
        if let Ok(other) = libc::pid_t::try_from(*other) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(other, signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_descendants_of_a_process() {
        use std::io::BufRead;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let sleep: u32 = line.trim().parse().unwrap();
        let found = descendants(pid);
        assert_eq!(found, [sleep]);
        assert!(!descendants(std::process::id()).is_empty());
        signal_tree(pid, &found, libc::SIGKILL);
        child.wait().unwrap();
    }

    #[test]
    fn exits_read_like_a_shell() {
        assert!(ChildExit::Code(0).success());
        assert_eq!(ChildExit::Signal(9).code(), 137);
        assert_eq!(ChildExit::Code(3).to_string(), "exit code 3");
        assert_eq!(ChildExit::Signal(15).to_string(), "signal 15");
    }
}

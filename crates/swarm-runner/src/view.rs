//! The terminal view: what the runner waits for, what runs, what finished. Lines for
//! people on stderr, or JSON events through `tracing` (`--json`), never both.
//!
//! JSON lines carry `timestamp`, `level`, `agent`, `event`, `message` and the event's
//! own fields at the top level. Warnings of the libraries underneath go through
//! `tracing`, whose subscriber the caller of [`crate::run`] installs.

use std::{io::Write, time::Duration};

use serde_json::{Map, Value};

use crate::config::OutputFormat;

/// Writes the runner's events. Cheap to clone; every line names the agent, so several
/// runners in one process (`swarm demo`) stay readable.
#[derive(Debug, Clone)]
pub(crate) struct View {
    agent: String,
    format: OutputFormat,
}

/// How important a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Info,
    Warn,
}

impl View {
    pub fn new(agent: &str, format: OutputFormat) -> View {
        View { agent: agent.to_string(), format }
    }

    /// One event: `event` names it for machines, `message` says it for people, `fields`
    /// carry its details (they are only shown in JSON).
    pub fn emit(&self, level: Level, event: &str, message: &str, fields: &[(&str, Value)]) {
        if self.format == OutputFormat::WarningsOnly && level != Level::Warn {
            return;
        }
        let now = chrono::Utc::now();
        let line = match self.format {
            OutputFormat::Text | OutputFormat::WarningsOnly => {
                let time = now.with_timezone(&chrono::Local).format("%H:%M:%S");
                let marker = if level == Level::Warn { "! " } else { "" };
                format!("{time} {agent} │ {marker}{message}", agent = self.agent)
            }
            OutputFormat::Json => {
                let mut object = Map::new();
                object.insert("timestamp".into(), now.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string().into());
                object.insert("level".into(), if level == Level::Warn { "WARN" } else { "INFO" }.into());
                object.insert("agent".into(), self.agent.clone().into());
                object.insert("event".into(), event.into());
                object.insert("message".into(), message.into());
                for (key, value) in fields {
                    object.insert(key.to_string(), value.clone());
                }
                Value::Object(object).to_string()
            }
        };
        // One write per line, so lines of concurrent runs never interleave.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    pub fn info(&self, event: &str, message: &str, fields: &[(&str, Value)]) {
        self.emit(Level::Info, event, message, fields);
    }

    pub fn warn(&self, event: &str, message: &str, fields: &[(&str, Value)]) {
        self.emit(Level::Warn, event, message, fields);
    }
}

/// `1h02m`, `3m05s`, `4.2s`: elapsed time for people.
pub(crate) fn human_duration(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds >= 3600 {
        format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60)
    } else if seconds >= 60 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{:.1}s", elapsed.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(4_200)), "4.2s");
        assert_eq!(human_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(human_duration(Duration::from_secs(3_720)), "1h02m");
    }
}

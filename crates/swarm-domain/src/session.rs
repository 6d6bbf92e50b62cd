//! What runners report about agent sessions: output lines and costs.

use serde::{Deserialize, Serialize};

use crate::{
    Invalid,
    id::{AgentId, TaskId},
    reject_nul,
    time::Timestamp,
};

pub const SESSION_LINES_MAX: usize = 10_000;
pub const SESSION_LINE_MAX_CHARS: usize = 1_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionLog {
    pub id: i64,
    pub session_id: String,
    pub iteration: i64,
    pub task_id: Option<TaskId>,
    pub cli: Option<String>,
    /// Position of the line within its (session, iteration), from 0.
    pub line_number: i64,
    pub content: String,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSessionLogs {
    pub session_id: String,
    pub iteration: i64,
    pub task_id: Option<TaskId>,
    pub cli: Option<String>,
    pub lines: Vec<String>,
}

impl NewSessionLogs {
    pub fn parse(
        session_id: String,
        iteration: i64,
        task_id: Option<TaskId>,
        cli: Option<String>,
        lines: Vec<String>,
    ) -> Result<Self, Invalid> {
        let session_id = parse_session_id(session_id)?;
        if iteration < 0 {
            return Err(Invalid::new("iteration must not be negative"));
        }
        if lines.len() > SESSION_LINES_MAX {
            return Err(Invalid(format!("at most {SESSION_LINES_MAX} lines per request")));
        }
        if lines.iter().any(|line| line.len() > SESSION_LINE_MAX_CHARS) {
            return Err(Invalid(format!("each line must be at most {SESSION_LINE_MAX_CHARS} bytes")));
        }
        if let Some(cli) = &cli {
            reject_nul("cli", cli)?;
        }
        // Agent output may carry a stray NUL; keep the line rather than lose the batch.
        let lines = lines.into_iter().map(|line| line.replace('\0', "\u{FFFD}")).collect();
        Ok(NewSessionLogs { session_id, iteration, task_id, cli, lines })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCost {
    pub id: i64,
    pub session_id: String,
    pub agent_id: AgentId,
    pub task_id: Option<TaskId>,
    pub total_cost_usd: f64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub duration_ms: Option<i64>,
    pub num_turns: Option<i64>,
    pub model: Option<String>,
    pub is_error: bool,
    pub created_at: Timestamp,
}

/// More than any one run can cost: a larger figure is a fault (or an attack on the
/// totals people read), not a bill.
pub const SESSION_COST_MAX_USD: f64 = 100_000.0;
/// More tokens, turns or milliseconds than one run can have (a year is 3.2e10 ms).
pub const SESSION_COUNT_MAX: i64 = 1_000_000_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct NewSessionCost {
    pub session_id: String,
    pub agent_id: AgentId,
    pub task_id: Option<TaskId>,
    pub total_cost_usd: f64,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cache_read_tokens: Option<i64>,
    pub cache_write_tokens: Option<i64>,
    pub duration_ms: Option<i64>,
    pub num_turns: Option<i64>,
    pub model: Option<String>,
    pub is_error: bool,
}

impl NewSessionCost {
    pub fn validate(self) -> Result<Self, Invalid> {
        let session_id = parse_session_id(self.session_id)?;
        if let Some(model) = &self.model {
            reject_nul("model", model)?;
        }
        if !self.total_cost_usd.is_finite() || !(0.0..=SESSION_COST_MAX_USD).contains(&self.total_cost_usd) {
            return Err(Invalid(format!(
                "totalCostUsd must be a number from 0 to {SESSION_COST_MAX_USD} (one run's cost in US dollars)"
            )));
        }
        let counts = [
            ("inputTokens", self.input_tokens),
            ("outputTokens", self.output_tokens),
            ("cacheReadTokens", self.cache_read_tokens),
            ("cacheWriteTokens", self.cache_write_tokens),
            ("durationMs", self.duration_ms),
            ("numTurns", self.num_turns),
        ];
        if let Some((field, _)) =
            counts.iter().find(|(_, value)| value.is_some_and(|v| !(0..=SESSION_COUNT_MAX).contains(&v)))
        {
            return Err(Invalid(format!("{field} must be from 0 to {SESSION_COUNT_MAX}")));
        }
        Ok(NewSessionCost { session_id, ..self })
    }
}

fn parse_session_id(session_id: String) -> Result<String, Invalid> {
    let trimmed = session_id.trim();
    reject_nul("sessionId", trimmed)?;
    if trimmed.is_empty() || trimmed.len() > 200 {
        return Err(Invalid::new("sessionId must be 1 to 200 characters"));
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_in_log_lines_is_replaced_not_refused() {
        let logs = NewSessionLogs::parse("s".into(), 0, None, None, vec!["a\0b".into()]).unwrap();
        assert_eq!(logs.lines, vec!["a\u{FFFD}b".to_string()]);
        assert!(NewSessionLogs::parse("s\0".into(), 0, None, None, vec![]).is_err());
    }
}

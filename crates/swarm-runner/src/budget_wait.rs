//! Waiting out a daily budget (issue 40): a poll answered `budget_refused` claimed nothing,
//! and polling again at once would only be refused again. The runner waits, longer after
//! each refusal in a row, and says why and when it looks again. A raised budget is seen
//! at the next look, so the wait is capped well below the reference's five minutes.

use std::time::Duration;

use serde_json::json;
use swarm_client::BudgetRefused;

use crate::view::{View, human_duration};

const FIRST_WAIT: Duration = Duration::from_secs(2);
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Refusals in a row; any other answer of a poll ends the run of them.
#[derive(Debug, Default)]
pub(crate) struct BudgetWait {
    refusals_in_a_row: u32,
}

impl BudgetWait {
    /// Counts a refusal, shows it, and returns how long to wait before polling again.
    pub fn refused(&mut self, view: &View, refused: &BudgetRefused) -> Duration {
        let wait = FIRST_WAIT.saturating_mul(1 << self.refusals_in_a_row.min(8)).min(LONGEST_WAIT);
        self.refusals_in_a_row = self.refusals_in_a_row.saturating_add(1);
        view.info(
            "budget_refused",
            &format!("{}: no new work starts; asking again in {}", refused.describe(), human_duration(wait)),
            &[
                ("cause", json!(refused.cause)),
                ("resetAt", json!(refused.reset_at)),
                ("retryInMs", json!(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))),
                ("refusalsInARow", json!(self.refusals_in_a_row)),
            ],
        );
        wait
    }

    pub fn reset(&mut self) {
        self.refusals_in_a_row = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_a_minute() {
        let view = View::new("test", crate::config::OutputFormat::Text);
        let refused = BudgetRefused {
            cause: "global".into(),
            agent_spend: None,
            agent_budget: None,
            global_spend: Some(3.0),
            global_budget: Some(3.0),
            reset_at: None,
        };
        let mut wait = BudgetWait::default();
        let waits: Vec<u64> = (0..8).map(|_| wait.refused(&view, &refused).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60]);
        wait.reset();
        assert_eq!(wait.refused(&view, &refused).as_secs(), 2, "a poll that got work starts over");
    }
}

//! The lead-side claims: inbox messages (`slack_inbox_message`), mentioning channels
//! (`unread_mentions`) and urgent mail (`urgent_mail`). Each kind is claimed by its own
//! module's poll claim, with a lease held by the polling runner (`lease_holder`); their
//! leases are extended, run out and come back the same way, which is this module: one
//! table of what differs (names), one statement shape each.
//!
//! Every name is a constant of this module, never input: the statements built from them
//! are safe to run as text.

use swarm_domain::id::AgentId;

use super::Dialect;

/// One kind of held claim, by the names that differ.
#[derive(Debug)]
pub struct HeldClaim {
    table: &'static str,
    /// The agent the rows belong to.
    owner: &'static str,
    /// The rows a poll has claimed.
    claimed: &'static str,
    /// What returns a row to where a poll finds it; `{now}` is the time of the return.
    release: &'static str,
}

pub const INBOX: HeldClaim = HeldClaim {
    table: "inbox_messages",
    owner: "agent_id",
    claimed: "status = 'processing'",
    release: "status = 'unread', last_updated_at = {now}",
};
pub const MENTIONS: HeldClaim = HeldClaim {
    table: "channel_reads",
    owner: "agent_id",
    claimed: "processing_since IS NOT NULL",
    release: "processing_since = NULL",
};
pub const MAIL: HeldClaim = HeldClaim {
    table: "mail",
    owner: "to_agent_id",
    claimed: "status = 'processing'",
    release: "status = 'unread', processing_since = NULL",
};
pub const ALL: [&HeldClaim; 3] = [&INBOX, &MENTIONS, &MAIL];

/// Agents whose held claims came back, by kind, once per row.
#[derive(Debug, Default)]
pub struct Returned {
    pub inbox: Vec<AgentId>,
    pub mentions: Vec<AgentId>,
    pub mail: Vec<AgentId>,
}

impl HeldClaim {
    pub fn table(&self) -> &'static str {
        self.table
    }

    /// A heartbeat extends the agent's claims that its runner holds and those no runner
    /// holds, never another runner's. Parameters: the new lease end, the agent, the
    /// runner (or NULL).
    pub fn extend_leases(&self, dialect: Dialect) -> String {
        format!(
            "UPDATE {table} SET lease_expires_at = {until} WHERE {owner} = {agent} AND {claimed} \
             AND (lease_holder IS NULL OR lease_holder = {runner})",
            table = self.table,
            owner = self.owner,
            claimed = self.claimed,
            until = dialect.param(1),
            agent = dialect.param(2),
            runner = dialect.param(3),
        )
    }

    /// The rescuer: claims whose lease ran out go back to where a poll finds them,
    /// returning their owners, once per row. Parameter: now.
    pub fn return_expired(&self, dialect: Dialect) -> String {
        let now = dialect.param(1);
        format!(
            "UPDATE {table} SET {release}, lease_expires_at = NULL \
             WHERE {claimed} AND lease_expires_at IS NOT NULL AND lease_expires_at < {now} \
             RETURNING {owner}",
            table = self.table,
            release = self.release.replace("{now}", &now),
            claimed = self.claimed,
            owner = self.owner,
        )
    }
}

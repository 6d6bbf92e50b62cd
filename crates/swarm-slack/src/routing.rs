//! Who a Slack message is for (the reference's rules, docs/slack.md), first match wins, among
//! agents that are not offline: `swarm#<agent-uuid>`; `swarm#all` (every worker); a
//! whole word of an agent's name (3+ letters, not a common word; several agents → the
//! lead, saying it was ambiguous); a reply in a thread → the agent already working a
//! task from it; a mention of the bot (or a direct message) → the lead. Pure: the
//! bridge gathers the facts.

use swarm_domain::id::AgentId;

/// An agent that may receive Slack messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: AgentId,
    pub name: String,
    pub is_lead: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub agent: AgentId,
    pub is_lead: bool,
    /// Why it was routed there (`matchedText`).
    pub matched_text: String,
}

pub struct Message<'a> {
    pub text: &'a str,
    pub mentions_bot: bool,
    pub direct_message: bool,
    /// The agent working a task from this message's thread, when it is a thread reply.
    pub thread_agent: Option<AgentId>,
}

/// Words too common to name an agent by.
const COMMON_WORDS: &[&str] = &[
    "the", "and", "for", "you", "all", "are", "can", "not", "but", "with", "this", "that", "from", "have",
    "what", "when", "please", "agent", "agents", "worker", "workers", "lead", "bot", "swarm", "task",
    "tasks", "help", "new", "test", "code", "review", "main", "fix", "bug", "run", "build", "check", "team",
    "dev",
];

pub fn route(message: &Message<'_>, candidates: &[Candidate]) -> Vec<Target> {
    let lead = candidates.iter().find(|agent| agent.is_lead);
    let to = |agent: &Candidate, why: String| Target {
        agent: agent.id,
        is_lead: agent.is_lead,
        matched_text: why,
    };
    let lower = message.text.to_lowercase();

    let named: Vec<Target> = explicit_ids(&lower)
        .filter_map(|id| candidates.iter().find(|agent| agent.id == id))
        .map(|agent| to(agent, format!("swarm#{}", agent.id)))
        .collect();
    if !named.is_empty() {
        return named;
    }
    if lower.contains("swarm#all") {
        return candidates
            .iter()
            .filter(|agent| !agent.is_lead)
            .map(|agent| to(agent, "swarm#all".into()))
            .collect();
    }
    let words: Vec<&str> =
        lower.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).collect();
    let by_name: Vec<(&Candidate, String)> = candidates
        .iter()
        .filter_map(|agent| {
            let word = name_words(&agent.name).into_iter().find(|word| words.contains(&word.as_str()))?;
            Some((agent, word))
        })
        .collect();
    match by_name.as_slice() {
        [(agent, word)] => return vec![to(agent, word.clone())],
        [_, _, ..] => {
            if let Some(lead) = lead {
                let names: Vec<&str> = by_name.iter().map(|(agent, _)| agent.name.as_str()).collect();
                return vec![to(lead, format!("ambiguous: matches {}", names.join(", ")))];
            }
        }
        [] => {}
    }
    if let Some(agent) = message.thread_agent.and_then(|id| candidates.iter().find(|agent| agent.id == id)) {
        return vec![to(agent, "thread reply".into())];
    }
    if message.mentions_bot || message.direct_message {
        let why = if message.direct_message { "direct message" } else { "bot mention" };
        return lead.map(|lead| vec![to(lead, why.into())]).unwrap_or_default();
    }
    Vec::new()
}

fn explicit_ids(lower: &str) -> impl Iterator<Item = AgentId> + '_ {
    lower.match_indices("swarm#").filter_map(|(at, _)| {
        let rest = &lower[at + "swarm#".len()..];
        rest.get(..36).and_then(|id| AgentId::parse(id).ok())
    })
}

fn name_words(name: &str) -> Vec<String> {
    name.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3 && !COMMON_WORDS.contains(word))
        .filter(|word| !word.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents() -> Vec<Candidate> {
        vec![
            Candidate { id: AgentId::new_v7(), name: "lead-boss".into(), is_lead: true },
            Candidate { id: AgentId::new_v7(), name: "alpha-coder".into(), is_lead: false },
            Candidate { id: AgentId::new_v7(), name: "beta-tester".into(), is_lead: false },
        ]
    }

    fn message(text: &str) -> Message<'_> {
        Message { text, mentions_bot: false, direct_message: false, thread_agent: None }
    }

    #[test]
    fn routing_follows_the_contract_order() {
        let all = agents();
        let (lead, alpha, beta) = (all[0].id, all[1].id, all[2].id);
        let ids = |targets: Vec<Target>| targets.into_iter().map(|t| t.agent).collect::<Vec<_>>();
        assert_eq!(ids(route(&message(&format!("hey swarm#{beta} and alpha")), &all)), vec![beta]);
        assert_eq!(ids(route(&message("swarm#all deploy"), &all)), vec![alpha, beta]);
        assert_eq!(ids(route(&message("Alpha, please look"), &all)), vec![alpha]);
        let ambiguous = route(&message("alpha and beta"), &all);
        assert_eq!(ambiguous[0].agent, lead);
        assert!(ambiguous[0].matched_text.starts_with("ambiguous"), "{ambiguous:?}");
        assert!(route(&message("the coder"), &all).len() == 1, "coder is a name word");
        let thread = Message { thread_agent: Some(beta), ..message("any news?") };
        assert_eq!(ids(route(&thread, &all)), vec![beta]);
        let mention = Message { mentions_bot: true, ..message("what is up") };
        assert_eq!(ids(route(&mention, &all)), vec![lead]);
        assert!(route(&message("just chatting"), &all).is_empty(), "no match, no route");
    }
}

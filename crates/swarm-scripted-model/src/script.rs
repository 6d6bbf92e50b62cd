//! What the scripted model does: a list of steps, played in order, one per model turn.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::conversation::{Action, Conversation};

type Build<T> = Arc<dyn Fn(&Conversation) -> T + Send + Sync>;

/// One thing the model does in answer to one request.
#[derive(Clone)]
pub enum Step {
    /// Call the offered tool whose name ends with `suffix` (`-` and `_` compare equal, so
    /// `"store-progress"` finds Claude Code's `mcp__agent-swarm__store-progress` and Codex's
    /// `store_progress` in namespace `mcp__agent_swarm`), with the arguments `args` builds.
    /// Codex offers MCP tools only through its `tool_search` tool: when the tool is not in
    /// sight and `tool_search` is offered, the model searches first (an extra request that is
    /// not a step) and calls the tool in the next request.
    CallTool { suffix: String, args: Build<Value> },
    /// Like [`Step::CallTool`], the tool chosen from the conversation too: one script can then
    /// play runs that need different tools at the same step (reviewing an offer, working a task).
    CallChosenTool(Build<(String, Value)>),
    /// Run a shell command through the CLI's own shell tool (Claude Code: `Bash`; Codex:
    /// `exec_command`).
    Shell(Build<String>),
    /// Answer with this text and end the turn.
    Reply(Build<String>),
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CallTool { suffix, .. } => write!(f, "CallTool({suffix:?})"),
            Step::CallChosenTool(_) => f.write_str("CallChosenTool"),
            Step::Shell(_) => f.write_str("Shell"),
            Step::Reply(_) => f.write_str("Reply"),
        }
    }
}

/// Token counts reported with every response, so cost and token reporting can be checked:
/// a run of `n` model requests reports `n` times these numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage { input_tokens: 100, output_tokens: 20 }
    }
}

/// A way for the model to refuse every request (see [`crate::ScriptedModel::set_failure`]).
/// A model that is down altogether is [`crate::ScriptedModel::stop`] or
/// [`crate::ScriptedModel::closed_base_url`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// 401 with each API's authentication error body (a refused key).
    Reply401,
    /// Any other status, with an error body (both CLIs retry 5xx and 429 a few times).
    Status(u16),
    /// Accept each model turn and never answer it: a stream that never starts, the CLI
    /// silent until someone stops it (a stalled run). Other requests are answered.
    Hang,
}

/// The agent the model plays: steps in order, then `finished_text` forever.
///
/// The model keeps no state: the CLIs send the whole conversation with every request, and
/// the step to play is the number of steps already visible in it (tool results plus final
/// replies that ended an earlier turn). So a resumed session goes on with the next step.
#[derive(Clone, Debug)]
pub struct Script {
    pub steps: Vec<Step>,
    pub usage: Usage,
    /// The reply once every step has been played.
    pub finished_text: String,
}

impl Default for Script {
    fn default() -> Self {
        Script::new()
    }
}

impl Script {
    pub fn new() -> Script {
        Script {
            steps: Vec::new(),
            usage: Usage::default(),
            finished_text: "The scripted model has no more steps.".to_owned(),
        }
    }

    /// Calls the offered tool whose name ends with `suffix`; see [`Step::CallTool`].
    pub fn call_tool(
        mut self,
        suffix: &str,
        args: impl Fn(&Conversation) -> Value + Send + Sync + 'static,
    ) -> Script {
        self.steps.push(Step::CallTool { suffix: suffix.to_owned(), args: Arc::new(args) });
        self
    }

    /// Calls the tool `choose` names (a suffix, see [`Step::CallTool`]) with the arguments it
    /// builds, both from the conversation.
    pub fn call_tool_with(
        mut self,
        choose: impl Fn(&Conversation) -> (String, Value) + Send + Sync + 'static,
    ) -> Script {
        self.steps.push(Step::CallChosenTool(Arc::new(choose)));
        self
    }

    /// Runs `command` through the CLI's shell tool.
    pub fn shell(self, command: &str) -> Script {
        let command = command.to_owned();
        self.shell_with(move |_| command.clone())
    }

    /// Runs the command `command` builds from the conversation through the CLI's shell tool.
    pub fn shell_with(mut self, command: impl Fn(&Conversation) -> String + Send + Sync + 'static) -> Script {
        self.steps.push(Step::Shell(Arc::new(command)));
        self
    }

    /// Answers `text` and ends the turn.
    pub fn reply(self, text: &str) -> Script {
        let text = text.to_owned();
        self.reply_with(move |_| text.clone())
    }

    /// Answers the text `text` builds from the conversation and ends the turn.
    pub fn reply_with(mut self, text: impl Fn(&Conversation) -> String + Send + Sync + 'static) -> Script {
        self.steps.push(Step::Reply(Arc::new(text)));
        self
    }

    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Script {
        self.usage = Usage { input_tokens, output_tokens };
        self
    }
}

impl Script {
    pub(crate) fn decide(&self, conversation: &Conversation) -> Action {
        let Some(step) = self.steps.get(conversation.steps_done()) else {
            return Action::Text(self.finished_text.clone());
        };
        match step {
            Step::Reply(text) => Action::Text(text(conversation)),
            Step::CallTool { suffix, args } => call(conversation, suffix, || args(conversation)),
            Step::CallChosenTool(choose) => {
                let (suffix, args) = choose(conversation);
                call(conversation, &suffix, || args)
            }
            Step::Shell(command) => match conversation.shell_call(&command(conversation)) {
                Some(action) => action,
                None => Action::Text(format!(
                    "scripted model: the CLI offers no shell tool; offered: {}",
                    conversation.tool_names().join(", ")
                )),
            },
        }
    }
}

/// The call of the offered tool ending with `suffix`, a search for it first when Codex keeps
/// it behind `tool_search` or Claude Code defers it behind `ToolSearch` (`tool_search.rs`).
fn call(conversation: &Conversation, suffix: &str, args: impl FnOnce() -> Value) -> Action {
    match (conversation.find_tool(suffix), conversation.claude_tool_search(suffix)) {
        (Some(tool), _) => Action::Tool { namespace: tool.namespace, name: tool.name, input: args() },
        (None, Some(load)) => load,
        (None, None) if conversation.may_search_tools() => Action::ToolSearch {
            query: format!("{} {}", suffix.replace('-', "_"), suffix.replace(['-', '_'], " ")),
        },
        (None, None) => Action::Text(format!(
            "scripted model: no offered tool ends with `{suffix}`; offered: {}",
            conversation.tool_names().join(", ")
        )),
    }
}

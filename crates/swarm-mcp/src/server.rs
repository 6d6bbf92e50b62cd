//! The MCP server handler: lists the tools the caller's role may use and dispatches
//! calls to them; serves the prompts, the resources (read through the same tools) and
//! completion of task ids. Written by hand rather than with rmcp's tool macros so that
//! the list depends on who asks and the server is named `swarm`.

// `logging/setLevel` and `resources/subscribe` are deprecated by the 2026-07-28 revision
// (SEP-2577, `subscriptions/listen`) yet still the 2025 revisions' way, which swarm speaks too.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
        CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
        GetTaskParams, GetTaskResult as TaskResult, Implementation, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel, MetaObject,
        PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
        Reference, ResourceContents, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};
use swarm_domain::id::AgentId;
use swarm_service::{Service, ServiceError};

use crate::{
    context::{CallerInfo, Identity, ToolCall},
    prompts,
    registry::Registry,
    reply::Reply,
    resources,
    subscriptions::Subscriptions,
};

/// The one tool that changes who the caller is.
const JOIN_SWARM: &str = "join-swarm";

const INSTRUCTIONS: &str = "swarm coordinates a crew of AI coding agents: a lead that delegates and \
workers that take tasks. Join with join-swarm (then send your agent id as the X-Agent-ID header), \
see the crew with get-swarm and the work with get-tasks. Workers wait for work with poll-task, accept \
or reject offers with task-action, and report with store-progress. Every tool answers with \
{yourAgentId, success, message, ...}; success false comes with the reason.";

/// The most task ids one completion offers.
const COMPLETIONS_MAX: usize = 100;

/// One MCP server: the tools of one surface (HTTP or stdio), over one service.
#[derive(Clone)]
pub struct McpServer {
    service: Service,
    identity: Identity,
    registry: Arc<Registry>,
    /// Who listens for changes (stdio only: a stateless HTTP request has no session to
    /// notify later).
    subscriptions: Subscriptions,
    /// The level `logging/setLevel` asked for. swarm sends no log messages to clients (its
    /// log is its own); the level is kept so the request is honoured, not refused.
    log_level: Arc<std::sync::Mutex<Option<LoggingLevel>>>,
}

impl McpServer {
    pub(crate) fn new(service: Service, identity: Identity, registry: Arc<Registry>) -> Self {
        McpServer {
            service,
            identity,
            registry,
            subscriptions: Subscriptions::default(),
            log_level: Arc::default(),
        }
    }

    pub(crate) fn service(&self) -> &Service {
        &self.service
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    async fn caller(&self, context: &RequestContext<RoleServer>) -> Result<CallerInfo, CallerError> {
        let caller = self.caller_of(context.extensions.get::<http::request::Parts>()).await?;
        if let Some(agent) = &caller.agent {
            // A session that talks to the hub is alive: an agent driven by a person (no
            // runner polling for it) stays online while its session is live.
            self.service.agent_seen(agent).await;
        }
        Ok(caller)
    }

    /// The caller, without taking the lookup as a sign of life (the subscription watcher
    /// reads on the process's behalf, not the agent's).
    async fn caller_of(&self, parts: Option<&http::request::Parts>) -> Result<CallerInfo, CallerError> {
        let id = self.identity.agent_id(parts).map_err(CallerError::BadHeader)?;
        let session_task = self.identity.session_task(parts).map_err(CallerError::BadHeader)?;
        let authenticated = self.identity.authenticated(parts).map_err(CallerError::BadHeader)?;
        let mut caller =
            CallerInfo::resolve(&self.service, id, authenticated).await.map_err(CallerError::Service)?;
        caller.session_task = session_task;
        Ok(caller)
    }
}

enum CallerError {
    BadHeader(String),
    Service(ServiceError),
}

impl CallerError {
    fn into_error(self) -> ErrorData {
        match self {
            CallerError::BadHeader(message) => ErrorData::invalid_request(message, None),
            CallerError::Service(err) => {
                tracing::error!(error = %err, "cannot look up the caller");
                ErrorData::internal_error("the hub could not look up the caller", None)
            }
        }
    }
}

impl McpServer {
    /// Run the tool `name` for `caller` as `tools/call` would: the audience rule, then
    /// the handler. Returns the reply and the id it answers for.
    pub(crate) async fn run_tool(
        &self,
        name: &str,
        caller: CallerInfo,
        arguments: Value,
    ) -> Option<(Reply, Option<AgentId>)> {
        let spec = self.registry.find(name)?;
        let role = caller.role();
        let caller_id = caller.id;
        if !spec.audience.admits(role) {
            return Some((Reply::refused(spec.audience.refusal(spec.name(), role)), caller_id));
        }
        let call = ToolCall { service: self.service.clone(), caller, identity: self.identity.clone() };
        Some((spec.call(call, arguments).await, caller_id))
    }

    /// The document of the resource `uri` for `caller`; `Err` is the JSON-RPC error.
    async fn read_document(&self, uri: &str, caller: CallerInfo) -> Result<String, ErrorData> {
        let not_found = |message: String| ErrorData::invalid_params(message, Some(json!({"uri": uri})));
        let (tool, arguments) =
            resources::tool_call(uri).ok_or_else(|| not_found(format!("no such resource: {uri}")))?;
        let (reply, caller_id) = self
            .run_tool(tool, caller, arguments)
            .await
            .ok_or_else(|| not_found(format!("this server does not offer {uri}")))?;
        let success = reply.is_success();
        let value = reply.into_value(caller_id);
        if !success {
            let message = value["message"].as_str().unwrap_or("refused").to_string();
            return Err(not_found(message));
        }
        Ok(resources::document(value))
    }

    /// Start reading subscribed resources (once per process).
    fn start_watching(&self) {
        let server = self.clone();
        tokio::spawn(self.subscriptions.clone().watch(move |uri| {
            let server = server.clone();
            async move {
                let caller = server.caller_of(None).await.ok()?;
                server.read_document(&uri, caller).await.ok()
            }
        }));
    }

    /// The `slack-inbox` prompt: the caller's open inbox messages (or the one asked for) in
    /// the text the runner sends the lead.
    async fn inbox_prompt(
        &self,
        arguments: Option<&serde_json::Map<String, Value>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResult, ErrorData> {
        let wanted = prompts::inbox_message_id(arguments)
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        let caller = self.caller(context).await.map_err(CallerError::into_error)?;
        if caller.agent.is_none() {
            return Err(ErrorData::invalid_params(
                "slack-inbox shows a registered agent's inbox: join the swarm (join-swarm), then send your \
                 agent id as the X-Agent-ID header (swarm mcp: --agent-id or AGENT_ID)",
                None,
            ));
        }
        let service_caller = caller.service_caller();
        let messages = match wanted {
            Some(id) => self.service.inbox_get(service_caller, id).await.map(|message| vec![message]),
            None => {
                let open = swarm_domain::inbox::InboxStatus::OPEN.to_vec();
                let limit = Some(swarm_domain::inbox::INBOX_TRIGGER_MAX);
                self.service.inbox_list(service_caller, None, open, limit).await
            }
        };
        match messages {
            Ok(messages) => Ok(prompts::inbox_result(messages)),
            Err(ServiceError::Internal(cause)) => {
                tracing::error!(error = %cause, "cannot read the inbox for a prompt");
                Err(ErrorData::internal_error("the hub could not read the inbox", None))
            }
            Err(refused) => Err(ErrorData::invalid_params(refused.to_string(), None)),
        }
    }

    /// Task ids of `caller` starting with `prefix`, for completion.
    async fn complete_task_ids(&self, caller: CallerInfo, prefix: &str) -> Vec<String> {
        let arguments = json!({"limit": 100});
        let Some((reply, caller_id)) = self.run_tool("get-tasks", caller, arguments).await else {
            return Vec::new();
        };
        let value = reply.into_value(caller_id);
        let tasks = value["tasks"].as_array().cloned().unwrap_or_default();
        tasks
            .iter()
            .filter_map(|task| task["id"].as_str())
            .filter(|id| id.starts_with(prefix))
            .take(COMPLETIONS_MAX)
            .map(str::to_string)
            .collect()
    }

    /// The caller's open inbox message ids starting with `prefix`, for `slack-inbox`.
    async fn complete_inbox_ids(&self, caller: CallerInfo, prefix: &str) -> Vec<String> {
        if caller.agent.is_none() {
            return Vec::new();
        }
        let open = swarm_domain::inbox::InboxStatus::OPEN.to_vec();
        let limit = Some(swarm_domain::inbox::INBOX_TRIGGER_MAX);
        let messages = self.service.inbox_list(caller.service_caller(), None, open, limit).await;
        messages
            .unwrap_or_default()
            .iter()
            .map(|message| message.id.to_string())
            .filter(|id| id.starts_with(prefix))
            .take(COMPLETIONS_MAX)
            .collect()
    }
}

fn server_info() -> Implementation {
    Implementation::new("swarm", env!("CARGO_PKG_VERSION"))
        .with_title("swarm: a coordination hub for crews of AI coding agents")
}

/// A 2026-07-28 result names the server in its `_meta` (there is no `initialize` result
/// to do it once); older revisions' results carry nothing.
fn result_meta(context: &RequestContext<RoleServer>) -> Option<MetaObject> {
    if !is_stateless_revision(context) {
        return None;
    }
    let mut meta = MetaObject::default();
    meta.0.insert("io.modelcontextprotocol/serverInfo".into(), json!(server_info()));
    Some(meta)
}

/// Whether a request came with the 2026-07-28 revision's per-request metadata (no
/// session: only `subscriptions/listen` streams get notifications).
fn is_stateless_revision(context: &RequestContext<RoleServer>) -> bool {
    context.meta.protocol_version().is_some()
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.identity.is_header() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_completions()
                .enable_logging()
                .enable_tasks()
                .build()
        } else {
            // A stdio process's tools change when it joins the swarm, and it can say so;
            // it has one client, so it can tell it when a resource changes too.
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_completions()
                .enable_logging()
                .enable_tasks()
                .build()
        };
        ServerConfig::new(capabilities).with_server_info(server_info()).with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        let capabilities = caller.agent.as_ref().map(|agent| agent.capabilities.clone()).unwrap_or_default();
        let tools: Vec<Tool> =
            self.registry.offered_to(caller.role(), &capabilities).map(|spec| spec.tool.clone()).collect();
        // The list depends on the caller. rmcp marks it `cacheScope: private, ttlMs: 0`
        // for 2026-07-28 clients (no shared cache may hand it to another agent); older
        // revisions have no cache hints.
        let mut result = ListToolsResult::with_all_items(tools);
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.registry.find(&request.name).is_none() {
            return Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None));
        }
        let caller = match self.caller(&context).await {
            Ok(caller) => caller,
            Err(CallerError::BadHeader(message)) => {
                return Ok(Reply::refused(message).into_result(None).into());
            }
            Err(CallerError::Service(err)) => return Ok(Reply::from(err).into_result(None).into()),
        };
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let declared = declared_tasks(&context);
        if let Some(CallToolResponse::Task(mut task)) =
            self.start_task(&request.name, &caller, &arguments, declared).await?
        {
            task.meta = result_meta(&context);
            return Ok(CallToolResponse::Task(task));
        }
        let Some((reply, caller_id)) = self.run_tool(&request.name, caller, arguments).await else {
            return Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None));
        };
        if reply.is_success() && !self.identity.is_header() && request.name == JOIN_SWARM {
            // A stdio process that just joined has a role now, and so other tools. A
            // 2026-07-28 client hears of it only on a stream that asked for it.
            if is_stateless_revision(&context) {
                self.subscriptions.tool_list_changed().await;
            } else {
                let _ = context.peer.notify_tool_list_changed().await;
            }
        }
        let mut result = reply.into_result(caller_id);
        result.meta = result_meta(&context);
        Ok(result.into())
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.registry.find(name).map(|spec| spec.tool.clone())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut result = ListPromptsResult::with_all_items(prompts::list());
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let mut result = if request.name == swarm_domain::prompts::inbox::PROMPT_NAME {
            self.inbox_prompt(request.arguments.as_ref(), &context).await?
        } else {
            prompts::get(&request.name, request.arguments.as_ref())
                .map_err(|message| ErrorData::invalid_params(message, None))?
        };
        result.meta = result_meta(&context);
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        let role = caller.role();
        let visible = |tool: &str| self.registry.find(tool).is_some_and(|spec| spec.audience.admits(role));
        let registered = role != crate::context::Role::Unregistered;
        let mut result = ListResourcesResult::with_all_items(resources::list(registered, visible));
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut result = ListResourceTemplatesResult::with_all_items(resources::templates());
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        let document = self.read_document(&request.uri, caller).await?;
        let contents = ResourceContents::text(document, request.uri).with_mime_type(resources::MIME_TYPE);
        // A caller's own view: never shared, never fresh for long.
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private)
            .into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.identity.is_header() {
            return Err(ErrorData::method_not_found::<rmcp::model::SubscribeRequestMethod>());
        }
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        // Subscribing to what the caller may not read would tell it of changes it cannot see.
        let document = self.read_document(&request.uri, caller).await?;
        if self.subscriptions.subscribe(request.uri, document, context.peer.clone()) {
            self.start_watching();
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.identity.is_header() {
            return Err(ErrorData::method_not_found::<rmcp::model::UnsubscribeRequestMethod>());
        }
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        // Only a stdio process has one client to stream to for as long as it listens.
        let accepted = (!self.identity.is_header()).then(|| requested.clone());
        if accepted.as_ref().is_some_and(|filter| filter.tools_list_changed == Some(true)) {
            self.subscriptions.acknowledging();
        }
        accepted
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let (start_watching, missed_tool_change) = self.subscriptions.listen(sink.clone());
        if start_watching {
            self.start_watching();
        }
        if missed_tool_change {
            let _ = sink.notify_tool_list_changed().await;
        }
        context.cancelled().await;
        self.subscriptions.stop_listening(&sink);
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let names_task = match &request.r#ref {
            Reference::Prompt(prompt) => swarm_domain::prompts::command(&prompt.name)
                .and_then(prompts::argument)
                .is_some_and(|argument| {
                    argument.name == prompts::TASK_ID_ARGUMENT && request.argument.name == argument.name
                }),
            Reference::Resource(resource) => {
                resource.uri == resources::TASK_TEMPLATE && request.argument.name == "id"
            }
            _ => false,
        };
        let names_inbox_message = matches!(&request.r#ref,
            Reference::Prompt(prompt) if prompt.name == swarm_domain::prompts::inbox::PROMPT_NAME)
            && request.argument.name == prompts::INBOX_MESSAGE_ARGUMENT;
        let values = if names_task {
            let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
            self.complete_task_ids(caller, &request.argument.value).await
        } else if names_inbox_message {
            let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
            self.complete_inbox_ids(caller, &request.argument.value).await
        } else {
            Vec::new()
        };
        let completion =
            CompletionInfo::new(values).map_err(|message| ErrorData::internal_error(message, None))?;
        let mut result = CompleteResult::new(completion);
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<TaskResult, ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        let mut result = self.task_state(caller, &request.task_id).await?;
        result.meta = result_meta(&context);
        Ok(result)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        self.task_cancel(caller, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = self.caller(&context).await.map_err(CallerError::into_error)?;
        self.task_update(caller, &request.task_id).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(request.level);
        Ok(())
    }
}

/// Whether the request declared the Tasks extension (its metadata, or a stdio client's
/// `initialize`): only then does a waiting tool run as a task (`tasks_ext.rs`).
fn declared_tasks(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|capabilities| capabilities.supports_tasks())
}

// The pages, in navigation order. A page is a module under pages/ that exports
// `mount(root, route)` and returns `{onChange(changes), dispose()}` (both optional);
// `route.parts` are the hash path's segments (`#/tasks/<id>` → ['tasks', '<id>']) and
// `route.params` its query. Adding a page: write the module, add it to ASSETS in
// crates/swarm-api/src/dashboard/mod.rs, and add one line here.
export const pages = [
  { name: 'overview', title: 'Overview', module: './overview.js' },
  { name: 'agents', title: 'Agents', module: './agents.js' },
  { name: 'tasks', title: 'Tasks', module: './tasks.js' },
  { name: 'epics', title: 'Epics', module: './epics.js' },
  { name: 'inbox', title: 'Inbox', module: './inbox.js' },
  { name: 'channels', title: 'Channels', module: './channels.js' },
  { name: 'mail', title: 'Mail', module: './mail.js' },
  { name: 'triggers', title: 'Triggers', module: './triggers.js' },
];

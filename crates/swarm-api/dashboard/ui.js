// Small DOM helpers. Data from the hub is only ever set as text (textContent, attribute
// values), never parsed as HTML, so a task text or a Slack message cannot inject markup.

/** `h('a', {href: '#/x', class: 'y'}, 'text', child)`; `on*` attributes take functions. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

export const FINISHED = ['completed', 'failed', 'cancelled'];
export const TASK_STATUSES = [
  'backlog', 'unassigned', 'offered', 'reviewing', 'pending', 'in_progress', 'paused', 'completed', 'failed', 'cancelled',
];

export function badge(status) {
  return h('span', { class: `badge status-${status}` }, String(status).replace('_', ' '));
}

/** An id in a few characters: its last 8. Ids are UUIDv7, whose first 8 hex digits are a
 *  timestamp that ids made in the same minute share; the last 8 are random. The same rule
 *  as `swarm_domain::id::short_id` (CLI, Slack), whose task commands take it back. */
export function shortId(id) {
  return id ? `…${String(id).slice(-8)}` : '';
}

/** "12s ago", "3m ago", or the date for older times; the exact time on hover. */
export function ago(iso) {
  if (!iso) return h('span', { class: 'muted' }, '-');
  const then = new Date(iso);
  const seconds = Math.max(0, Math.round((Date.now() - then.getTime()) / 1000));
  let text;
  if (seconds < 60) text = `${seconds}s ago`;
  else if (seconds < 3600) text = `${Math.floor(seconds / 60)}m ago`;
  else if (seconds < 86400) text = `${Math.floor(seconds / 3600)}h ago`;
  else text = then.toLocaleDateString();
  return h('time', { datetime: iso, title: then.toLocaleString() }, text);
}

export function taskLink(id, text) {
  return h('a', { href: `#/tasks/${id}`, class: 'task-link', title: id }, text ?? shortId(id));
}

export function agentLink(id, agents) {
  if (!id) return h('span', { class: 'muted' }, '-');
  const agent = agents?.get(id);
  return h('a', { href: `#/agents/${id}`, title: id }, agent ? agent.name : shortId(id));
}

/** A table; `columns` are `[heading, row => cell]`. */
export function table(columns, rows, { empty = 'Nothing here yet.', rowAttributes } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h('table', {},
    h('thead', {}, h('tr', {}, columns.map(([heading]) => h('th', {}, heading)))),
    h('tbody', {}, rows.map((row) => h('tr', rowAttributes ? rowAttributes(row) : {},
      // The heading again as a label: a narrow screen shows each row as a labelled list.
      columns.map(([heading, cell]) => h('td', { dataset: typeof heading === 'string' && heading ? { label: heading } : {} }, cell(row)))))));
}

/** `text` in at most `length` characters, cut at a word (not inside one) with an ellipsis. */
export function clip(text, length = 140) {
  const value = String(text ?? '');
  if (value.length <= length) return value;
  const cut = value.slice(0, length - 1);
  const space = cut.search(/\s\S*$/);
  // A single long word (a URL, a path) is cut where it must be.
  return `${(space > length / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** A task as a one-line title: its first non-empty line, clipped at a word. */
export function oneLine(text, length = 100) {
  const first = String(text ?? '').split('\n').map((line) => line.trim()).find(Boolean) ?? '';
  return clip(first, length);
}

export function errorBox(error) {
  return h('p', { class: 'error', role: 'alert' }, error?.message || String(error));
}

/** Agents by id, for names in tables. */
export function agentsById(agents) {
  return new Map((agents || []).map((agent) => [agent.id, agent]));
}

/** A form whose submit calls `action(formData)` and shows its error, if any. */
export function form(attributes, fields, action) {
  const status = h('p', { class: 'form-status', role: 'status' });
  const element = h('form', attributes, fields, status);
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = '';
    status.classList.remove('error');
    const button = element.querySelector('button[type=submit]');
    if (button) button.disabled = true;
    try {
      await action(new FormData(element), element);
    } catch (error) {
      status.textContent = error.message || String(error);
      status.classList.add('error');
    } finally {
      if (button) button.disabled = false;
    }
  });
  return element;
}

// What an operator can do to tasks: the buttons on a task's page and the bulk bar of the
// Tasks list. Every change goes through the hub's REST actions, which guard it again;
// anything that throws work away or takes it from an online agent asks first, in the
// page (a browser's confirm() dialog blocks the live updates and is easy to click away).

import { api } from './api.js';
import { FINISHED, fill, h } from './ui.js';

/** Statuses whose text can still change (the hub's `TaskStatus::EDITABLE`). */
const EDITABLE = ['backlog', 'unassigned', 'offered', 'pending'];
/** Statuses in which an agent holds the task (`agentId`, or `offeredTo` for an offer). */
const HELD = ['pending', 'in_progress', 'paused', 'offered', 'reviewing'];

const taskPath = (id, action) => `/api/tasks/${encodeURIComponent(id)}/${action}`;

/** Who holds the task, if anyone: the offer's agent or the assignee. */
export function holderOf(task) {
  if (!HELD.includes(task.status)) return null;
  return ['offered', 'reviewing'].includes(task.status) ? task.offeredTo : task.agentId;
}

/**
 * A button that asks before it acts: a click shows `question` with a confirm button
 * (and any `fields`, such as a reason), and only that second click runs `action(panel)`.
 */
export function confirmButton({ id, label, question, confirmLabel, danger = false, fields = [] }, action) {
  const holder = h('span', { class: 'confirmable' });
  const status = h('span', { class: 'form-status', role: 'status' });
  const open = () => {
    const yes = h('button', { type: 'submit', class: `confirm-yes${danger ? ' danger' : ''}` }, confirmLabel);
    const panel = h('form', { class: 'confirm', id: `${id}-confirm`, role: 'alertdialog' },
      h('p', {}, question), fields,
      h('div', { class: 'row' }, yes,
        h('button', { type: 'button', class: 'confirm-no secondary', onclick: close }, 'Keep it as it is')),
      status);
    panel.addEventListener('submit', async (event) => {
      event.preventDefault();
      yes.disabled = true;
      status.textContent = '';
      try {
        await action(new FormData(panel));
        close();
      } catch (error) {
        status.textContent = error.message || String(error);
        status.classList.add('error');
        yes.disabled = false;
      }
    });
    fill(holder, panel);
    panel.querySelector('input, select, .confirm-yes')?.focus();
  };
  const close = () => fill(holder, h('button', { type: 'button', id, class: danger ? 'danger' : 'secondary', onclick: open }, label));
  close();
  return holder;
}

/** A button that acts at once (nothing is lost by it), showing a refusal beside it. */
function actButton({ id, label }, action) {
  const status = h('span', { class: 'form-status', role: 'status' });
  const button = h('button', { type: 'button', id, class: 'secondary' }, label);
  button.addEventListener('click', async () => {
    button.disabled = true;
    status.textContent = '';
    try {
      await action();
    } catch (error) {
      status.textContent = error.message || String(error);
      status.classList.add('error');
    } finally {
      button.disabled = false;
    }
  });
  return h('span', { class: 'confirmable' }, button, status);
}

function agentOptions(agents, exceptId) {
  return agents.filter((agent) => agent.id !== exceptId && !agent.isLead)
    .map((agent) => h('option', { value: agent.id }, `${agent.name} (${agent.status})`));
}

/**
 * The actions a task offers in its status, as a card: pause/resume, retry, edit,
 * priority, backlog, release, reassign and cancel. `reload()` re-reads the page;
 * `open(id)` shows another task (the retry).
 */
export function taskActions(task, agents, { reload, open }) {
  const byId = new Map(agents.map((agent) => [agent.id, agent]));
  const holderId = holderOf(task);
  const holder = holderId ? byId.get(holderId) : null;
  const online = holder && holder.status !== 'offline';
  const finished = FINISHED.includes(task.status);
  const post = async (action, body = {}) => {
    await api(taskPath(task.id, action), { method: 'POST', body });
    await reload();
  };
  const buttons = [];

  if (task.status === 'in_progress') {
    buttons.push(confirmButton({
      id: 'action-pause', label: 'Pause', confirmLabel: 'Pause it',
      question: `Pause this task? ${holder?.name ?? 'Its agent'} keeps the task; its run in progress is not stopped (steer it or cancel for that), and Resume puts the task back in progress.`,
    }, () => post('pause')));
  }
  if (task.status === 'paused') buttons.push(actButton({ id: 'action-resume', label: 'Resume' }, () => post('resume')));
  if (task.status === 'unassigned') buttons.push(actButton({ id: 'action-to-backlog', label: 'Move to backlog' }, () => post('to-backlog')));
  if (task.status === 'backlog') buttons.push(actButton({ id: 'action-from-backlog', label: 'Move to the pool' }, () => post('from-backlog')));
  if (finished) {
    buttons.push(actButton({ id: 'action-retry', label: 'Retry as a new task' }, async () => {
      const body = { task: task.task, priority: task.priority };
      if (task.tags?.length) body.tags = task.tags;
      if (task.epicId) body.epicId = task.epicId;
      const created = await api('/api/tasks', { method: 'POST', body });
      open(created.id);
    }));
  }
  if (holder && !online) {
    buttons.push(confirmButton({
      id: 'action-release', label: 'Release to the pool', confirmLabel: 'Release it',
      question: `${holder.name} is offline: give its task back to the pool for any worker?`,
    }, () => post('release')));
  }
  if (!finished && (holderId || ['unassigned', 'backlog'].includes(task.status))) {
    const targets = agentOptions(agents, holderId);
    if (targets.length) {
      const select = h('select', { name: 'agentId', id: 'reassign-agent', 'aria-label': 'Reassign to' }, targets);
      const reassign = online
        ? confirmButton({
          id: 'action-reassign', label: 'Reassign…', confirmLabel: 'Take it from them',
          question: `${holder.name} is online and holds this task. Reassign it anyway? Its run in progress is not stopped, and what it reports at the end is refused.`,
          fields: [h('label', {}, 'to ', select)],
        }, (data) => post('reassign', { agentId: String(data.get('agentId')), evenIfOnline: true }))
        : confirmButton({
          id: 'action-reassign', label: 'Reassign…', confirmLabel: 'Reassign',
          question: 'Give this task to another agent (pending for it)?',
          fields: [h('label', {}, 'to ', select)],
        }, (data) => post('reassign', { agentId: String(data.get('agentId')) }));
      buttons.push(reassign);
    }
  }
  if (!finished) {
    buttons.push(confirmButton({
      id: 'action-cancel', label: 'Cancel task…', confirmLabel: 'Yes, cancel the task', danger: true,
      question: holder && task.status === 'in_progress'
        ? `Cancel this task? ${holder.name} is working on it; its runner stops the run.`
        : 'Cancel this task? It cannot be undone (Retry makes a new one).',
      fields: [h('input', { name: 'reason', placeholder: 'reason (optional)', 'aria-label': 'Reason' })],
    }, (data) => {
      const reason = String(data.get('reason') || '').trim();
      return post('cancel', reason ? { reason } : {});
    }));
  }

  const forms = [];
  if (!finished) forms.push(priorityForm(task, post));
  if (EDITABLE.includes(task.status)) forms.push(editForm(task, reload));
  return h('div', { class: 'card actions', id: 'task-actions' },
    h('h3', {}, 'Actions'),
    h('div', { class: 'action-buttons' }, buttons.length ? buttons : h('span', { class: 'muted' }, 'None in this status.')),
    forms);
}

function priorityForm(task, post) {
  const status = h('span', { class: 'form-status', role: 'status' });
  const element = h('form', { class: 'inline', id: 'priority-form' },
    h('label', {}, 'Priority ', h('input', { name: 'priority', type: 'number', min: 0, max: 100, value: task.priority, required: true })),
    h('button', { type: 'submit', class: 'secondary' }, 'Set priority'), status);
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = '';
    try {
      await post('priority', { priority: Number(new FormData(element).get('priority')) });
    } catch (error) {
      status.textContent = error.message;
      status.classList.add('error');
    }
  });
  return element;
}

function editForm(task, reload) {
  const status = h('span', { class: 'form-status', role: 'status' });
  const element = h('form', { id: 'edit-form' },
    h('textarea', { name: 'task', rows: 4, required: true, 'aria-label': 'Task text' }, task.task),
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'secondary' }, 'Save the text'), status));
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = '';
    try {
      await api(taskPath(task.id, 'edit'), { method: 'POST', body: { task: String(new FormData(element).get('task')) } });
      await reload();
    } catch (error) {
      status.textContent = error.message;
      status.classList.add('error');
    }
  });
  return h('details', { class: 'edit' }, h('summary', {}, 'Edit the text (until an agent takes it up)'), element);
}

/** What each bulk action asks and does to one task. */
const BULK = {
  cancel: { label: 'Cancel', question: (n) => `Cancel ${n} task(s)? It cannot be undone.`, danger: true,
    run: (id) => api(taskPath(id, 'cancel'), { method: 'POST', body: { reason: 'cancelled from the dashboard (bulk)' } }) },
  backlog: { label: 'Move to backlog', question: (n) => `Move ${n} task(s) to the backlog? Only pool tasks can go there.`,
    run: (id) => api(taskPath(id, 'to-backlog'), { method: 'POST', body: {} }) },
  priority: { label: 'Set priority', question: (n, form) => `Set the priority of ${n} task(s) to ${form.get('priority')}?`,
    run: (id, form) => api(taskPath(id, 'priority'), { method: 'POST', body: { priority: Number(form.get('priority')) } }) },
  reassign: { label: 'Reassign', question: (n) => `Reassign ${n} task(s) to the chosen agent? Tasks held by an online agent are refused.`,
    run: (id, form) => api(taskPath(id, 'reassign'), { method: 'POST', body: { agentId: String(form.get('agentId')) } }) },
};

/**
 * The bar above the Tasks list: what to do with the selected rows, each after a
 * confirmation, one request per task; the answer says how many changed and why others did not.
 * `selected()` gives the selected ids; `done()` re-reads the list.
 */
export function bulkBar({ selected, done }) {
  const agentSelect = h('select', { name: 'agentId', 'aria-label': 'Reassign to' });
  const count = h('strong', { id: 'bulk-count' }, '0');
  const result = h('p', { class: 'form-status', id: 'bulk-result', role: 'status' });
  const confirm = h('div', { class: 'bulk-confirm' });
  const controls = h('form', { class: 'filters bulk', id: 'bulk-actions' },
    count, ' selected:',
    h('button', { type: 'button', class: 'danger', dataset: { bulk: 'cancel' } }, 'Cancel…'),
    h('button', { type: 'button', class: 'secondary', dataset: { bulk: 'backlog' } }, 'Move to backlog…'),
    h('label', {}, 'priority ', h('input', { name: 'priority', type: 'number', min: 0, max: 100, value: 50, class: 'narrow' })),
    h('button', { type: 'button', class: 'secondary', dataset: { bulk: 'priority' } }, 'Set…'),
    agentSelect,
    h('button', { type: 'button', class: 'secondary', dataset: { bulk: 'reassign' } }, 'Reassign…'));
  controls.addEventListener('submit', (event) => event.preventDefault());
  controls.addEventListener('click', (event) => {
    const kind = event.target?.dataset?.bulk;
    if (!kind) return;
    const ids = selected();
    result.textContent = '';
    if (!ids.length) {
      result.textContent = 'Select tasks first (the boxes on the left).';
      return;
    }
    const spec = BULK[kind];
    const form = new FormData(controls);
    const yes = h('button', { type: 'button', class: `confirm-yes${spec.danger ? ' danger' : ''}` }, `Yes: ${spec.label.toLowerCase()} ${ids.length}`);
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      const refused = [];
      for (const id of ids) {
        try {
          await spec.run(id, form);
        } catch (error) {
          refused.push(error.message);
        }
      }
      fill(confirm);
      result.classList.toggle('error', refused.length > 0);
      result.textContent = `${ids.length - refused.length} of ${ids.length} changed.`
        + (refused.length ? ` Refused: ${[...new Set(refused)].join('; ')}` : '');
      await done();
    });
    fill(confirm, h('div', { class: 'confirm', id: 'bulk-confirm', role: 'alertdialog' },
      h('p', {}, spec.question(ids.length, form)),
      h('div', { class: 'row' }, yes, h('button', { type: 'button', class: 'confirm-no secondary', onclick: () => fill(confirm) }, 'Keep them'))));
  });
  return {
    element: h('div', { class: 'card bulk-bar', id: 'bulk-bar' }, controls, confirm, result),
    update(agents, selectedCount) {
      count.textContent = String(selectedCount);
      const chosen = agentSelect.value;
      fill(agentSelect, agents.filter((agent) => !agent.isLead)
        .map((agent) => h('option', { value: agent.id, selected: agent.id === chosen }, `${agent.name} (${agent.status})`)));
    },
    setCount(selectedCount) {
      count.textContent = String(selectedCount);
    },
  };
}

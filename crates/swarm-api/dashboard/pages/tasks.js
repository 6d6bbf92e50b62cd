// Tasks: one page of the list at a time (filters by status, agent, source, text, kept in
// the URL), a form to create one, and the detail view (task.js) for `#/tasks/<id>`.

import { api, withQuery } from '../api.js';
import { agentLink, agentsById, ago, badge, clip, errorBox, fill, form, h, shortId, table, TASK_STATUSES, taskLink } from '../ui.js';
import { mountTask } from './task.js';
import { bulkBar } from '../actions.js';

const PAGE_SIZE = 50;

export function mount(root, route) {
  return route.parts[1] ? mountTask(root, route.parts[1]) : mountList(root, route.params);
}

function mountList(root, params) {
  const filters = {
    status: params.get('status') || '',
    agentId: params.get('agentId') || '',
    source: params.get('source') || '',
    search: params.get('search') || '',
  };
  const offset = Math.max(0, Number.parseInt(params.get('offset') || '0', 10) || 0);
  const agentSelect = h('select', { name: 'agentId' }, h('option', { value: '' }, 'any agent'));
  const targetSelect = h('select', { name: 'agentId' }, h('option', { value: '' }, 'the pool (any worker)'));
  const list = h('div', { id: 'task-list' });
  const pager = h('div', { class: 'pager' });

  const filterForm = h('form', { class: 'filters', id: 'task-filters' },
    h('select', { name: 'status' }, h('option', { value: '' }, 'any status'),
      TASK_STATUSES.map((status) => h('option', { value: status, selected: status === filters.status }, status.replace('_', ' ')))),
    agentSelect,
    h('input', { name: 'source', placeholder: 'source (api, slack, chat…)', value: filters.source }),
    h('input', { name: 'search', type: 'search', placeholder: 'text in the task', value: filters.search }),
    h('button', { type: 'submit' }, 'Filter'));
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(filterForm);
    location.hash = withQuery('#/tasks', Object.fromEntries(data.entries()));
  });

  const createForm = form({ class: 'card create', id: 'create-task' }, [
    h('h3', {}, 'New task'),
    h('textarea', { name: 'task', rows: 2, required: true, placeholder: 'What should be done?' }),
    h('div', { class: 'row' },
      h('label', {}, 'For ', targetSelect),
      h('label', {}, 'Priority ', h('input', { name: 'priority', type: 'number', min: 0, max: 100, value: 50 })),
      h('button', { type: 'submit' }, 'Create task')),
  ], async (data, element) => {
    const body = { task: String(data.get('task')), priority: Number(data.get('priority')) };
    if (data.get('agentId')) body.agentId = data.get('agentId');
    const task = await api('/api/tasks', { method: 'POST', body });
    element.reset();
    element.querySelector('.form-status').textContent = `Created task ${shortId(task.id)}.`;
    await load();
  });

  // Selected rows (by id) survive the live re-reads of the list.
  const chosen = new Set();
  const bulk = bulkBar({ selected: () => [...chosen], done: () => { chosen.clear(); return load(); } });
  const selectAll = h('input', { type: 'checkbox', id: 'select-all', 'aria-label': 'Select every task shown' });
  list.addEventListener('change', (event) => {
    const box = event.target;
    if (box === selectAll) {
      for (const row of list.querySelectorAll('input.select-task')) {
        row.checked = box.checked;
        if (box.checked) chosen.add(row.value); else chosen.delete(row.value);
      }
    } else if (box.classList?.contains('select-task')) {
      if (box.checked) chosen.add(box.value); else chosen.delete(box.value);
    }
    bulk.setCount(chosen.size);
  });

  fill(root, h('h1', {}, 'Tasks'), createForm, filterForm, bulk.element, list, pager);

  async function load() {
    try {
      const [page, agents] = await Promise.all([
        api(withQuery('/api/tasks', { ...filters, limit: PAGE_SIZE, offset })),
        api('/api/agents'),
      ]);
      const byId = agentsById(agents.agents);
      refreshAgentOptions(agentSelect, agents.agents, filters.agentId);
      refreshAgentOptions(targetSelect, agents.agents.filter((agent) => !agent.isLead), targetSelect.value);
      const shownIds = new Set(page.tasks.map((task) => task.id));
      for (const id of chosen) if (!shownIds.has(id)) chosen.delete(id);
      selectAll.checked = page.tasks.length > 0 && chosen.size === page.tasks.length;
      bulk.update(agents.agents, chosen.size);
      fill(list, table([
        [selectAll, (task) => h('input', { type: 'checkbox', class: 'select-task', value: task.id, checked: chosen.has(task.id), 'aria-label': 'Select this task' })],
        ['Id', (task) => taskLink(task.id)],
        ['Task', (task) => taskLink(task.id, clip(task.task, 100))],
        ['Status', (task) => badge(task.status)],
        ['Agent', (task) => agentLink(task.agentId || task.offeredTo, byId)],
        ['Source', (task) => task.source],
        ['Priority', (task) => task.priority],
        ['Updated', (task) => ago(task.lastUpdatedAt)],
      ], page.tasks, {
        empty: 'No task matches.',
        rowAttributes: (task) => ({ class: 'task-row', dataset: { taskId: task.id, status: task.status } }),
      }));
      const last = Math.min(offset + page.tasks.length, page.total);
      const moveTo = (to) => withQuery('#/tasks', { ...filters, offset: to || '' });
      fill(pager,
        offset > 0 ? h('a', { href: moveTo(Math.max(0, offset - PAGE_SIZE)) }, '← newer') : '',
        h('span', {}, page.total ? `${offset + 1}–${last} of ${page.total}` : ''),
        last < page.total ? h('a', { href: moveTo(offset + PAGE_SIZE) }, 'older →') : '');
    } catch (error) {
      fill(list, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      // Not on agent changes: heartbeats would re-read the page every few seconds.
      if (changes.some((change) => ['task', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

function refreshAgentOptions(select, agents, selected) {
  const first = select.firstElementChild;
  fill(select, first, agents.map((agent) => h('option', { value: agent.id, selected: agent.id === selected }, agent.name)));
}

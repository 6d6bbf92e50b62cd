// Overview: first what needs a person (needs-you.js), then who is up and what each is
// doing, tasks by status, the daily budgets and what was spent against each today, the
// spend per agent, epic and day (costs.js), the latest events.
// Four small requests, none of which grows with the number of tasks in the hub, and the
// last hour's points (a minute each, kept by the hub) drawn as three small charts. The
// events name their tasks by title: those not in progress are read once each (at most
// EVENTS_LIMIT) and remembered while the page is open.

import { api } from '../api.js';
import { costsSection, readCosts } from '../costs.js';
import { needsYou } from '../needs-you.js';
import { agentLink, agentsById, ago, badge, clip, errorBox, fill, h, table, TASK_STATUSES, taskLink } from '../ui.js';

const WORKING_LIMIT = 100;
const EVENTS_LIMIT = 25;
const CHARTS = [
  { key: 'queueDepth', id: 'chart-queue', title: 'Queue depth', unit: '', now: queueDepth, hint: 'tasks unassigned, offered or pending' },
  { key: 'triggerWaitP95Ms', id: 'chart-trigger-wait', title: 'Trigger wait p95', unit: ' ms' },
  { key: 'runsFinished', id: 'chart-runs', title: 'Runs per minute', unit: '' },
];
const SVG = 'http://www.w3.org/2000/svg';

const usd = (amount) => `$${Number(amount).toFixed(2)}`;

/** The daily budgets (issue 40), each with what its scope spent today (UTC): a budget
 *  reached refuses new work to its scope until it is raised or the day ends. */
function budgetsTable(budgets, byId) {
  return table([
    ['Scope', (budget) => (budget.scope === 'global' ? 'everyone (global)' : agentLink(budget.scopeId, byId))],
    ['Spent today', (budget) => usd(budget.spentTodayUsd ?? 0)],
    ['Daily budget', (budget) => usd(budget.dailyBudgetUsd)],
    ['', (budget) => {
      const spent = budget.spentTodayUsd ?? 0;
      const reached = spent >= budget.dailyBudgetUsd;
      return [
        h('meter', { min: 0, max: Math.max(budget.dailyBudgetUsd, spent, 0.01), value: spent, high: budget.dailyBudgetUsd * 0.8, optimum: 0 }),
        reached ? h('span', { class: 'badge status-failed', title: 'new work of this scope is refused until the budget is raised or the UTC day ends' }, ' reached') : '',
      ];
    }],
  ], budgets, {
    empty: 'No daily budget is set (PUT /api/budgets/global/_global or /api/budgets/agent/<id>).',
    rowAttributes: (budget) => ({ dataset: { budgetScope: budget.scope, budgetScopeId: budget.scopeId, reached: String((budget.spentTodayUsd ?? 0) >= budget.dailyBudgetUsd) } }),
  });
}

/** Tasks waiting to be taken up: in the pool, offered, or assigned and not started. The
 *  hub's `queueDepth` points (`/api/stats/history`) count the same, once a minute. */
function queueDepth(tasks) {
  return (tasks.unassigned ?? 0) + (tasks.offered ?? 0) + (tasks.pending ?? 0);
}

// A sparkline of one series: the last value in figures, the hour as a line.
function chart({ id, title, unit, hint }, values, now) {
  const width = 240;
  const height = 48;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `${title}, the last hour`);
  const known = values.filter((value) => value !== null && value !== undefined);
  const top = Math.max(1, ...known);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const points = values
    .map((value, index) => (value === null || value === undefined ? null : `${(index * step).toFixed(1)},${(height - 2 - (value / top) * (height - 4)).toFixed(1)}`))
    .filter(Boolean);
  if (points.length === 1) points.push(`${width},${points[0].split(',')[1]}`);
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', points.join(' '));
  svg.append(line);
  // The figure is the value now when the page knows it (the points are up to a minute old).
  const last = now ?? (known.length ? known[known.length - 1] : null);
  const figure = last === null ? '–' : `${Math.round(last * 10) / 10}${unit}`;
  return h('div', { class: 'chart', id, dataset: { points: String(values.length) } },
    h('span', { title: hint }, title), h('strong', {}, figure), svg);
}

export function mount(root) {
  const counts = h('div', { class: 'counts', id: 'task-counts' });
  const charts = h('div', { class: 'charts', id: 'overview-charts' });
  const agents = h('div', { id: 'overview-agents' });
  const budgets = h('div', { id: 'overview-budgets' });
  let budgetsShown = false;
  const events = h('div', { id: 'overview-events' });
  const needs = needsYou();
  const costs = h('div', { id: 'overview-costs' });
  fill(root,
    h('h1', {}, 'Overview'),
    h('h2', { id: 'needs-you-heading' }, 'Needs you'), needs.element,
    h('h2', {}, 'Tasks'), counts,
    h('h2', {}, 'The last hour'), charts,
    h('h2', {}, 'Agents'), agents,
    h('h2', {}, 'Budgets today'), budgets,
    h('h2', {}, 'Spend'), costs,
    h('h2', {}, 'Recent events'), events);

  // Task titles by id, for the events; a task gone (retention) keeps its short id.
  const titles = new Map();
  const edits = new Set();
  async function readTitles(logs, working) {
    for (const event of logs) {
      // An edit seen for the first time may have changed the title: read it again.
      if (event.eventType === 'task_edited' && !edits.has(event.id)) {
        edits.add(event.id);
        titles.delete(event.taskId);
      }
    }
    const inProgress = new Set(working.map((task) => task.id));
    const wanted = [...new Set(logs.map((event) => event.taskId).filter(Boolean))]
      .filter((id) => !titles.has(id) && !inProgress.has(id));
    const read = await Promise.all(wanted.map((id) => api(`/api/tasks/${encodeURIComponent(id)}`).catch(() => null)));
    for (const task of read) if (task) titles.set(task.id, task.task);
  }

  async function load() {
    try {
      const [stats, agentList, working, logs, history, budgetList, costSummary, epicList] = await Promise.all([
        api('/api/stats'),
        api('/api/agents'),
        api(`/api/tasks?status=in_progress&limit=${WORKING_LIMIT}`),
        api(`/api/logs?limit=${EVENTS_LIMIT}`),
        api('/api/stats/history'),
        api('/api/budgets'),
        readCosts(),
        api('/api/epics').catch(() => ({ epics: [] })),
      ]);
      await readTitles(logs.logs, working.tasks);
      fill(charts, CHARTS.map((spec) => {
        const now = spec.now ? spec.now(stats.tasks) : undefined;
        // The line ends at the value now, so figure and line agree.
        const values = history.points.map((point) => point[spec.key]);
        return chart(spec, now === undefined ? values : [...values, now], now);
      }));
      const byId = agentsById(agentList.agents);
      shownById = byId;
      const needsRead = needs.load(byId, agentList.agents);
      costsSection(costs, costSummary, { byId, budgets: budgetList.budgets, epics: epicList.epics });
      fill(counts,
        h('a', { class: 'count total', href: '#/tasks' }, h('strong', {}, stats.tasks.total), 'all'),
        TASK_STATUSES.map((status) => h('a', { class: `count status-${status}`, href: `#/tasks?status=${status}`, dataset: { status } },
          h('strong', {}, stats.tasks[status] ?? 0), status.replace('_', ' '))));
      const current = new Map();
      for (const task of working.tasks) {
        titles.set(task.id, task.task);
        if (!current.has(task.agentId)) current.set(task.agentId, []);
        current.get(task.agentId).push(task);
      }
      fill(agents, table([
        ['Agent', (agent) => [agentLink(agent.id, byId), agent.isLead ? h('span', { class: 'lead', title: 'lead' }, ' ♛') : '']],
        ['Status', (agent) => badge(agent.status)],
        ['Capacity', (agent) => `${agent.capacity.current} / ${agent.capacity.max}`],
        ['Working on', (agent) => (current.get(agent.id) || []).map((task) => h('div', {}, taskLink(task.id, clip(task.task, 80))))],
        ['Last seen', (agent) => ago(agent.lastUpdatedAt)],
      ], agentList.agents, { empty: 'No agent has joined yet. Start one with swarm worker.', rowAttributes: (agent) => ({ dataset: { agentId: agent.id } }) }));
      budgetsShown = budgetList.budgets.length > 0;
      fill(budgets, budgetsTable(budgetList.budgets, byId));
      fill(events, table([
        ['When', (event) => ago(event.createdAt)],
        ['Event', (event) => event.eventType],
        ['Agent', (event) => agentLink(event.agentId, byId)],
        ['Task', (event) => (event.taskId ? taskLink(event.taskId, titles.has(event.taskId) ? clip(titles.get(event.taskId), 60) : undefined) : '')],
        ['Change', (event) => [event.oldValue, event.newValue].filter(Boolean).join(' → ')],
      ], logs.logs, { empty: 'No events yet.', rowAttributes: (event) => ({ dataset: { eventType: event.eventType } }) }));
      await needsRead;
    } catch (error) {
      fill(events, errorBox(error));
    }
  }

  // Session output (log lines, costs) moves only the spend: one read of the costs (and
  // the budgets' spend, while one is set) instead of the whole page.
  let shownById = new Map();
  async function loadCosts() {
    try {
      const [costSummary, budgetList, epicList] = await Promise.all([
        readCosts(), api('/api/budgets'), api('/api/epics').catch(() => ({ epics: [] }))]);
      costsSection(costs, costSummary, { byId: shownById, budgets: budgetList.budgets, epics: epicList.epics });
      if (budgetsShown) fill(budgets, budgetsTable(budgetList.budgets, shownById));
    } catch (error) {
      fill(costs, errorBox(error));
    }
  }

  load();
  // Every change writes the event log, so any change is worth a re-read here, but for
  // session output, which moves only the spend.
  return {
    onChange(changes) {
      if (changes.some((change) => change.kind !== 'sessionOutput')) load();
      else loadCosts();
    },
  };
}

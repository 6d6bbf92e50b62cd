// What the crew spent (issue 49), from `GET /api/costs`: the session costs the runners
// report, summed by the hub per agent, per epic and per UTC day (today and 7 days), shown
// beside the daily budgets. Every figure sums the same costs, so the agents' rows, the
// epics' (with "no epic") and the days' each add up to the totals.

import { api } from './api.js';
import { agentLink, fill, h, table } from './ui.js';

export const usd = (amount) => `$${Number(amount ?? 0).toFixed(2)}`;

export function readCosts() {
  return api('/api/costs');
}

/** The daily budget that applies to `agentId` (its own, else none) from `/api/budgets`. */
function agentBudget(budgets, agentId) {
  return budgets.find((budget) => budget.scope === 'agent' && budget.scopeId === agentId);
}

// Set through the CSSOM: the page's CSP (style-src 'self') refuses style attributes.
function bar(fraction) {
  const element = h('span', { class: 'cost-bar' });
  element.style.height = `${Math.round(fraction * 100)}%`;
  return element;
}

function dayBars(days) {
  const top = Math.max(0.01, ...days.map((day) => day.costUsd));
  return h('div', { class: 'cost-days', id: 'cost-days' }, days.map((day) =>
    h('div', { class: 'cost-day', dataset: { date: day.date, usd: String(day.costUsd) }, title: `${day.date}: ${usd(day.costUsd)}, ${day.sessions} sessions` },
      bar(day.costUsd / top),
      h('small', {}, day.date.slice(5)), h('strong', {}, usd(day.costUsd)))));
}

/** The overview's section: totals, the 7 days, and the agents' and epics' shares. */
export function costsSection(element, summary, { byId, budgets = [], epics = [] }) {
  const global = budgets.find((budget) => budget.scope === 'global');
  const epicNames = new Map(epics.map((epic) => [epic.id, epic.name]));
  fill(element,
    h('div', { class: 'cost-totals' },
      h('div', { class: 'count', id: 'cost-today', dataset: { usd: String(summary.todayUsd) } },
        h('strong', {}, usd(summary.todayUsd)), `today (UTC)${global ? ` of ${usd(global.dailyBudgetUsd)}` : ''}`),
      h('div', { class: 'count', id: 'cost-week', dataset: { usd: String(summary.last7DaysUsd) } },
        h('strong', {}, usd(summary.last7DaysUsd)), 'last 7 days')),
    dayBars(summary.days),
    h('div', { class: 'cost-tables' },
      h('div', {}, h('h3', {}, 'Per agent'), table([
        ['Agent', (row) => agentLink(row.id, byId)],
        ['Today', (row) => usd(row.todayUsd)],
        ['Daily budget', (row) => {
          const budget = agentBudget(budgets, row.id);
          return budget ? usd(budget.dailyBudgetUsd) : h('span', { class: 'muted' }, '-');
        }],
        ['7 days', (row) => usd(row.last7DaysUsd)],
        ['Sessions', (row) => String(row.sessions)],
      ], summary.agents, {
        empty: 'No session cost reported in the last 7 days.',
        rowAttributes: (row) => ({ class: 'cost-agent', dataset: { agentId: row.id, today: String(row.todayUsd), week: String(row.last7DaysUsd) } }),
      })),
      h('div', {}, h('h3', {}, 'Per epic'), table([
        ['Epic', (row) => (row.id ? h('a', { href: '#/epics', title: row.id }, epicNames.get(row.id) || row.id.slice(-8)) : h('span', { class: 'muted' }, 'no epic'))],
        ['Today', (row) => usd(row.todayUsd)],
        ['7 days', (row) => usd(row.last7DaysUsd)],
      ], summary.epics, {
        empty: 'No session cost reported in the last 7 days.',
        rowAttributes: (row) => ({ class: 'cost-epic', dataset: { epicId: row.id || '', today: String(row.todayUsd), week: String(row.last7DaysUsd) } }),
      }))));
}

/** One agent's or epic's spend in a line: today, 7 days, and the budget when there is one. */
export function spendLine(row, budget) {
  const today = row?.todayUsd ?? 0;
  const week = row?.last7DaysUsd ?? 0;
  return h('span', { class: 'spend', dataset: { today: String(today), week: String(week) } },
    `${usd(today)} today`, budget ? [' of ', h('span', { class: 'spend-budget' }, usd(budget.dailyBudgetUsd)), ' budget'] : '',
    `, ${usd(week)} in 7 days`,
    budget && today >= budget.dailyBudgetUsd ? h('span', { class: 'badge status-failed' }, ' budget reached') : '');
}

/** The spend of agent `id` in `summary`, with its daily budget. */
export function agentSpend(summary, budgets, id) {
  return spendLine(summary.agents.find((row) => row.id === id), agentBudget(budgets, id));
}

export function epicSpend(summary, id) {
  return spendLine(summary.epics.find((row) => row.id === id));
}

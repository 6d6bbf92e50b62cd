// Agent mail: everyone's, or one agent's, newest first, a page at a time. Who waits
// for an answer, what is urgent and not yet read. Reading here is the operator's view:
// it delivers nothing (the agent's own read-mail and hooks do).

import { api, withQuery } from '../api.js';
import { agentLink, agentsById, ago, badge, errorBox, fill, h, table } from '../ui.js';

const LIMIT = 50;

export function mount(root, route) {
  const agent = route.params.get('agentId') || '';
  const after = route.params.get('after') || '';
  const body = h('div', { id: 'mail-list' });
  fill(root,
    h('h1', {}, 'Mail'),
    h('p', { class: 'filters' },
      agent ? h('a', { href: '#/mail' }, 'Everyone\'s mail') : 'Everyone\'s mail, newest first',
      after ? [' · ', h('a', { href: agent ? `#/mail?agentId=${agent}` : '#/mail' }, 'Newest')] : ''),
    body);

  async function load() {
    try {
      const { agents } = await api('/api/agents');
      const byId = agentsById(agents);
      const page = await api(withQuery('/api/mail', { agentId: agent, box: agent ? 'all' : '', after, limit: LIMIT }));
      const waiting = (mail) => mail.awaitingResponse && !mail.answeredAt;
      fill(body,
        agent ? h('p', { class: 'muted' }, 'Sent and received by ', agentLink(agent, byId)) : '',
        table([
          ['Sent', (mail) => ago(mail.createdAt)],
          ['From', (mail) => agentLink(mail.fromAgentId, byId)],
          ['To', (mail) => agentLink(mail.toAgentId, byId)],
          ['Priority', (mail) => badge(mail.priority)],
          ['Type', (mail) => mail.type],
          ['Subject', (mail) => [h('strong', {}, mail.subject), h('div', { class: 'prose muted' }, mail.body)]],
          ['Delivery', (mail) => badge(mail.status)],
          ['Answer', (mail) => waiting(mail) ? badge('waiting') : (mail.answeredAt ? ['answered ', ago(mail.answeredAt)] : '')],
        ], page.mail, {
          empty: 'No mail yet: agents write with send-mail.',
          rowAttributes: (mail) => ({ class: waiting(mail) ? 'mail-waiting' : '' }),
        }),
        page.nextCursor
          ? h('p', {}, h('a', { id: 'mail-older', href: withQuery('#/mail', { agentId: agent, after: page.nextCursor }) }, 'Older mail'))
          : '');
    } catch (error) {
      fill(body, errorBox(error));
    }
  }

  load();
  return {
    onChange(changes) {
      if (changes.some((change) => ['mail', 'external', 'resync'].includes(change.kind))) load();
    },
  };
}

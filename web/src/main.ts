/**
 * The page's entry: `/` lists sheets, `/sheets/<logId>` opens one. Anything thrown reaches the
 * message area in words; the page is never left blank.
 */
import { ApiError, call, setToken, token } from './api';
import { openSheet } from './sheet';
import { forget, known, UUID } from './sheets';
import { el, Messages } from './ui';

const root = document.getElementById('app') as HTMLElement;
const messages = new Messages(document.getElementById('messages') as HTMLElement);
token(); // takes a #token=… from the address into storage

window.addEventListener('error', (e) => messages.error(`Something went wrong: ${e.message}`));
window.addEventListener('unhandledrejection', (e) =>
  messages.error(e.reason instanceof ApiError ? e.reason.message : `Something went wrong: ${String(e.reason)}`),
);

function tokenForm(): HTMLElement {
  const input = el('input', {
    type: 'password',
    placeholder: 'JWT for a deployed API',
    value: token() ?? '',
    ariaLabel: 'token',
  });
  const save = el(
    'button',
    {
      type: 'button',
      onclick: () => {
        setToken(input.value);
        messages.info('Token saved in this browser.');
      },
    },
    'Save',
  );
  return el(
    'details',
    { className: 'token' },
    el('summary', {}, 'Token'),
    el('p', { className: 'hint' }, 'Only for a stack with JWT authorization; the local stack needs none.'),
    input,
    save,
  );
}

function listPage(): void {
  document.title = 'sheetlog';
  const openInput = el('input', { placeholder: 'sheet id (a UUID)', ariaLabel: 'sheet id', className: 'open-id' });
  const create = el('button', { type: 'button', className: 'primary new-sheet' }, 'New sheet');
  create.onclick = async () => {
    create.disabled = true;
    try {
      const made = await call<{ logId: string }>('POST', '/logs');
      location.assign(`/sheets/${made.logId}`);
    } catch (e) {
      messages.error(e instanceof ApiError ? e.message : String(e));
      create.disabled = false;
    }
  };
  const open = () => {
    const id = openInput.value.trim();
    if (!UUID.test(id))
      messages.error(`“${id}” is not a sheet id: ids look like 1b248f87-d184-4aaf-ab8b-26db48e21a3a.`);
    else location.assign(`/sheets/${id}`);
  };
  openInput.onkeydown = (e) => e.key === 'Enter' && open();
  const list = el('ul', { className: 'sheets' });
  const draw = () => {
    const items = known();
    list.replaceChildren(
      ...(items.length
        ? items.map((k) =>
            el(
              'li',
              {},
              el('a', { href: `/sheets/${k.id}` }, k.id),
              el('span', { className: 'meta' }, `opened ${new Date(k.opened).toLocaleString()}`),
              el(
                'button',
                {
                  type: 'button',
                  title: 'Remove from this list (the sheet stays)',
                  onclick: () => {
                    forget(k.id);
                    draw();
                  },
                },
                'Forget',
              ),
            ),
          )
        : [el('li', { className: 'empty' }, 'No sheets yet in this browser: make one, or open one by its id.')]),
    );
  };
  draw();
  root.replaceChildren(
    el('header', { className: 'toolbar' }, el('a', { href: '/', className: 'home' }, 'sheetlog'), tokenForm()),
    el(
      'main',
      { className: 'list' },
      el('h1', {}, 'Sheets'),
      el('div', { className: 'row' }, create, openInput, el('button', { type: 'button', onclick: open }, 'Open')),
      list,
    ),
  );
}

const m = /^\/sheets\/([^/]+)\/?$/.exec(location.pathname);
if (m) {
  const id = decodeURIComponent(m[1]);
  document.title = `sheet ${id.slice(0, 8)} · sheetlog`;
  if (!UUID.test(id)) {
    listPage();
    messages.error(`“${id}” is not a sheet id.`);
  } else {
    openSheet(root, id, messages).catch((e) => messages.error(e instanceof ApiError ? e.message : String(e)));
  }
} else {
  listPage();
}

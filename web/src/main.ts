/**
 * The page's entry: `/` lists sheets, `/sheets/<logId>` opens one (sheet.ts). It reads
 * `/config.json` first: in `cognito` mode it signs in (the forms in signin.ts, the calls in
 * session.ts), lists the server's sheets with names and roles, and shares them (share.ts); in the
 * other modes the list is this browser's (sheets.ts). Anything thrown reaches the message area in
 * words; the page is never left blank.
 */
import { ApiError, call, setAuthProvider, setToken, token, tokenProvider } from './api';
import { CognitoClient } from './cognito';
import { type AuthMode, loadConfig } from './config';
import { Session } from './session';
import { shareDialog } from './share';
import { openSheet } from './sheet';
import { ago, Catalog, can, forget, known, MAX_NAME, type SheetInfo, UUID } from './sheets';
import { signInPage } from './signin';
import { el, Messages, words } from './ui';

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

/** The list in modes without a catalog: the sheets this browser made or opened. */
function localListPage(mode: AuthMode): void {
  document.title = 'sheetlog';
  const openInput = el('input', { placeholder: 'sheet id (a UUID)', ariaLabel: 'sheet id', className: 'open-id' });
  const create = el('button', { type: 'button', className: 'primary new-sheet' }, 'New sheet');
  create.onclick = async () => {
    create.disabled = true;
    try {
      const made = await call<{ logId: string }>('POST', '/logs');
      location.assign(`/sheets/${made.logId}`);
    } catch (e) {
      messages.error(words(e));
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
  const notice =
    mode === 'iam'
      ? [
          el(
            'p',
            { className: 'banner' },
            'This stack authorizes with IAM, which a browser cannot sign: deploy with cognito (or jwt) to use the page.',
          ),
        ]
      : [];
  root.replaceChildren(
    el(
      'header',
      { className: 'toolbar' },
      el('a', { href: '/', className: 'home' }, 'sheetlog'),
      ...(mode === 'none' ? [] : [tokenForm()]),
    ),
    ...notice,
    el(
      'main',
      { className: 'list' },
      el('h1', {}, 'Sheets'),
      el('div', { className: 'row' }, create, openInput, el('button', { type: 'button', onclick: open }, 'Open')),
      list,
    ),
  );
}

// ---- cognito mode ----------------------------------------------------------------------------

/** How often an open sheet checks whether the signed-in person's role on it changed. */
const ROLE_POLL_MS = 30_000;

/** Names of sheets seen in the list, so a sheet's page can show its name (this tab only). */
const NAMES = 'sheetlog.names';
function rememberName(logId: string, name: string): void {
  try {
    const m = JSON.parse(sessionStorage.getItem(NAMES) ?? '{}') as Record<string, string>;
    m[logId] = name;
    sessionStorage.setItem(NAMES, JSON.stringify(m));
  } catch {}
}
function nameOf(logId: string): string | undefined {
  try {
    return (JSON.parse(sessionStorage.getItem(NAMES) ?? '{}') as Record<string, string>)[logId];
  } catch {
    return undefined;
  }
}

function accountBar(session: Session): HTMLElement {
  const out = el('button', { type: 'button', className: 'sign-out' }, 'Sign out');
  out.onclick = async () => {
    out.disabled = true;
    sessionStorage.removeItem(NAMES);
    session.onChange = () => {}; // no "you were signed out" form: the page starts afresh below
    await session.signOut();
    location.assign('/');
  };
  return el('span', { className: 'account' }, el('span', { className: 'who' }, session.email ?? ''), out);
}

/** What a row of the server's list needs: who is signed in, the catalog, and how to list again. */
interface CatalogList {
  session: Session;
  catalog: Catalog;
  refresh: () => Promise<void>;
}

/** A sheet in the server's list: its name, role and last change; rename, share or members, leave. */
function sheetRow(list: CatalogList, s: SheetInfo): HTMLElement {
  const { session, catalog } = list;
  rememberName(s.logId, s.name);
  const link = el('a', { href: `/sheets/${s.logId}`, className: 'name' }, s.name);
  const nameCell = el('td', {}, link);
  const actions = el('td', { className: 'actions' });
  const tr = el(
    'tr',
    {},
    nameCell,
    el('td', { className: 'role' }, s.role),
    el('td', { className: 'meta', title: new Date(s.updatedAt).toLocaleString() }, ago(s.updatedAt)),
    actions,
  );
  tr.dataset.logId = s.logId;
  tr.dataset.name = s.name;
  tr.dataset.role = s.role;
  if (can(s.role, 'edit')) {
    const rename = el('button', { type: 'button', className: 'rename' }, 'Rename');
    rename.onclick = () => {
      const input = el('input', { value: s.name, ariaLabel: 'sheet name', maxLength: MAX_NAME });
      const f = el('form', { className: 'rename-form' }, input, el('button', { type: 'submit' }, 'Save'));
      f.onsubmit = async (ev) => {
        ev.preventDefault();
        try {
          const updated = await catalog.rename(s.logId, input.value);
          tr.replaceWith(sheetRow(list, { ...s, ...updated }));
        } catch (e) {
          messages.error(words(e));
        }
      };
      input.onkeydown = (e) => {
        if (e.key === 'Escape') tr.replaceWith(sheetRow(list, s));
      };
      nameCell.replaceChildren(f);
      input.select();
    };
    actions.append(rename);
  }
  const share = el('button', { type: 'button', className: 'share' }, can(s.role, 'share') ? 'Share' : 'Members');
  share.onclick = () =>
    void shareDialog({
      catalog,
      messages,
      logId: s.logId,
      name: s.name,
      me: session.userId() ?? '',
      myEmail: session.email,
      onLeft: () => tr.remove(),
    }).then(() => list.refresh());
  const leave = el('button', { type: 'button', className: 'leave' }, 'Leave');
  leave.onclick = async () => {
    if (leave.dataset.confirm !== 'yes') {
      leave.dataset.confirm = 'yes';
      leave.textContent = 'Really leave?';
      return;
    }
    try {
      await catalog.remove(s.logId, session.userId() ?? '');
      tr.remove();
      messages.info(`You left “${s.name}”.`);
    } catch (e) {
      messages.error(
        e instanceof ApiError && e.status === 409
          ? 'You are this sheet’s only owner: make someone else owner before you leave.'
          : words(e),
      );
    }
  };
  actions.append(share, leave);
  return tr;
}

function catalogListPage(session: Session, catalog: Catalog): void {
  document.title = 'sheetlog';
  const name = el('input', {
    placeholder: 'Name of a new sheet',
    ariaLabel: 'new sheet name',
    className: 'new-name',
    maxLength: MAX_NAME,
  });
  const create = el('button', { type: 'submit', className: 'primary new-sheet' }, 'New sheet');
  const createForm = el('form', { className: 'row' }, name, create);
  createForm.onsubmit = async (ev) => {
    ev.preventDefault();
    create.disabled = true;
    try {
      const made = await catalog.create(name.value);
      location.assign(`/sheets/${made.logId}`);
    } catch (e) {
      messages.error(words(e));
      create.disabled = false;
    }
  };
  const rows = el('tbody', {});
  const more = el('button', { type: 'button', className: 'more', hidden: true }, 'More');
  const table = el(
    'table',
    { className: 'sheets' },
    el(
      'thead',
      {},
      el('tr', {}, el('th', {}, 'Name'), el('th', {}, 'Role'), el('th', {}, 'Last change'), el('th', {})),
    ),
    rows,
  );
  let cursor: string | null = null;

  async function page(reset: boolean): Promise<void> {
    more.disabled = true;
    try {
      const p = await catalog.list(reset ? null : cursor);
      cursor = p.cursor;
      if (reset) rows.replaceChildren();
      rows.append(...p.sheets.map((s) => sheetRow(list, s)));
      if (!rows.children.length)
        rows.append(el('tr', {}, el('td', { className: 'empty', colSpan: 4 }, 'No sheets yet: make one.')));
      more.hidden = !cursor;
      table.dataset.loaded = 'true';
    } catch (e) {
      messages.error(words(e), 'list');
    } finally {
      more.disabled = false;
    }
  }
  const refresh = () => page(true);
  const list: CatalogList = { session, catalog, refresh };
  more.onclick = () => void page(false);

  root.replaceChildren(
    el('header', { className: 'toolbar' }, el('a', { href: '/', className: 'home' }, 'sheetlog'), accountBar(session)),
    el('main', { className: 'list' }, el('h1', {}, 'Sheets'), createForm, table, more),
  );
  void refresh();
}

async function catalogSheetPage(session: Session, catalog: Catalog, logId: string): Promise<void> {
  const me = session.userId() ?? '';
  let role: 'viewer' | 'editor' | 'owner' | undefined;
  let named: string | undefined;
  try {
    const roster = await catalog.members(logId);
    role = roster.members.find((m) => m.userId === me)?.role;
    named = roster.name;
  } catch (e) {
    messages.error(words(e));
    root.replaceChildren(
      el(
        'header',
        { className: 'toolbar' },
        el('a', { href: '/', className: 'home' }, 'sheetlog'),
        accountBar(session),
      ),
      el('p', { className: 'empty' }, 'This sheet cannot be opened.'),
    );
    return;
  }
  // The catalog's name; the one the list showed when the answer has none.
  const name = named ?? nameOf(logId) ?? `sheet ${logId.slice(0, 8)}`;
  rememberName(logId, name);
  document.title = `${name} · sheetlog`;
  const share = el(
    'button',
    { type: 'button', className: 'share', title: `Members and roles (you are ${role ?? 'not a member'})` },
    can(role, 'share') ? 'Share' : 'Members',
  );
  share.onclick = () =>
    void shareDialog({
      catalog,
      messages,
      logId,
      name,
      me,
      myEmail: session.email,
      onLeft: () => location.assign('/'),
    });
  // A role changed by an owner while the sheet is open: the page opens it again as the new role
  // allows (a viewer has no pending edits to lose), or goes to the list when access is gone.
  // Checked when the sheet's channel says its members changed, and by a slow poll besides (a
  // poke can be lost, and a page without an Event API gets none).
  let checking = false;
  let done = false;
  let timer: number | undefined;
  const check = async (): Promise<void> => {
    if (done || checking) return;
    checking = true;
    try {
      await checkRole();
    } finally {
      checking = false;
    }
  };
  await openSheet(root, logId, messages, {
    readOnly: !can(role, 'edit'),
    user: me,
    name,
    // Who is signed in, and Sign out, as on the list.
    actions: [share, accountBar(session)],
    onMembers: () => void check(),
  });
  const every = Number(localStorage.getItem('sheetlog.rolePollMs')) || ROLE_POLL_MS;
  timer = window.setInterval(() => {
    if (document.visibilityState === 'visible') void check();
  }, every);
  async function checkRole(): Promise<void> {
    let now: typeof role;
    try {
      now = await catalog.roleOf(logId, me);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 403)) return; // offline: ask again later
      now = undefined;
    }
    if (now === role) return;
    if (now === undefined) {
      done = true;
      clearInterval(timer);
      messages.error(`You no longer have access to “${name}”.`);
      setTimeout(() => location.assign('/'), 1500);
    } else if (can(now, 'edit') !== can(role, 'edit')) {
      done = true;
      clearInterval(timer);
      location.reload();
    } else role = now;
  }
}

// ---- routing ---------------------------------------------------------------------------------

function sheetFromPath(): string | undefined | null {
  const m = /^\/sheets\/([^/]+)\/?$/.exec(location.pathname);
  if (!m) return undefined;
  const id = decodeURIComponent(m[1]);
  if (!UUID.test(id)) {
    messages.error(`“${id}” is not a sheet id.`);
    return null;
  }
  return id;
}

async function boot(): Promise<void> {
  let config: Awaited<ReturnType<typeof loadConfig>>;
  try {
    config = await loadConfig();
  } catch (e) {
    messages.error(words(e));
    config = { auth: 'jwt', cognito: null };
  }
  const id = sheetFromPath();
  if (config.auth !== 'cognito' || !config.cognito) {
    setAuthProvider(tokenProvider(config.auth));
    if (id) {
      document.title = `sheet ${id.slice(0, 8)} · sheetlog`;
      await openSheet(root, id, messages);
    } else localListPage(config.auth);
    return;
  }
  const session = new Session(new CognitoClient(config.cognito), localStorage);
  setAuthProvider({
    mode: 'cognito',
    header: () => {
      const t = session.accessToken();
      return t ? `Bearer ${t}` : '';
    },
    fresh: () => session.ensureFresh(),
    unauthorized: () => session.refresh(),
  });
  // A computer that slept missed its refresh timer: refresh as soon as the page is seen again.
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') void session.ensureFresh();
  });
  const catalog = new Catalog(call);
  const route = () => {
    if (id) void catalogSheetPage(session, catalog, id).catch((e) => messages.error(words(e)));
    else catalogListPage(session, catalog);
  };
  session.onChange = (signedIn) => {
    if (!signedIn) {
      messages.warn('You were signed out: sign in again.', 'signed-out');
      signInPage(root, session, () => location.reload());
    }
  };
  if (await session.restore()) route();
  else signInPage(root, session, route);
}

boot().catch((e) => messages.error(words(e)));

/**
 * The share dialog (cognito mode): a sheet's members and their roles, and the invitations not
 * yet claimed. Every member sees the list; an owner invites people by email (or adds them by
 * user id), changes roles, removes members and withdraws invitations; anyone may leave. The API
 * enforces all of it (docs/api.md); the page only hides what would be refused.
 */
import { ApiError } from './api';
import { type Catalog, can, type Invitation, type Member, ROLES, type Role } from './sheets';
import { el, type Messages } from './ui';

export interface ShareContext {
  catalog: Catalog;
  messages: Messages;
  logId: string;
  name: string;
  /** The signed-in person's user id (the access token's `sub`). */
  me: string;
  /** Their email, shown for them when the members list has none (the creator of a sheet). */
  myEmail?: string;
  /** After this person left the sheet, or lost its last role they could see. */
  onLeft: () => void;
}

function say(e: unknown, messages: Messages, status: HTMLElement): void {
  let text = e instanceof ApiError ? e.message : String(e);
  if (e instanceof ApiError && e.status === 409)
    text = 'A sheet needs an owner: make someone else owner before this one leaves or stops being one.';
  status.textContent = text;
  messages.error(text, 'share');
}

function roleSelect(value: Role, label: string): HTMLSelectElement {
  const s = el('select', { ariaLabel: label });
  for (const r of ROLES) s.append(el('option', { value: r, textContent: r }));
  s.value = value;
  return s;
}

/** Opens the dialog; resolves when it is closed. */
export async function shareDialog(ctx: ShareContext): Promise<void> {
  const { catalog, messages, logId, me } = ctx;
  const list = el('ul', { className: 'members' });
  const status = el('p', { className: 'form-error', role: 'alert' });
  const who = el('input', {
    type: 'text',
    placeholder: 'colleague@example.com',
    ariaLabel: 'email',
    autocomplete: 'off',
  });
  // The least a new member may do, as the owner raises it: reading.
  const newRole = roleSelect('viewer', 'new member role');
  const add = el('button', { type: 'submit', className: 'primary' }, 'Share');
  const addForm = el('form', { className: 'add-member' }, who, newRole, add);
  const close = el('button', { type: 'button', className: 'close' }, 'Done');
  const dialog = el(
    'dialog',
    { className: 'share' },
    el('h2', {}, `Share “${ctx.name}”`),
    list,
    addForm,
    status,
    el('div', { className: 'row end' }, close),
  );
  document.body.append(dialog);

  let myRole: Role | undefined;
  async function draw(): Promise<void> {
    let members: Member[];
    let invitations: Invitation[];
    try {
      ({ members, invitations } = await catalog.members(logId));
    } catch (e) {
      say(e, messages, status);
      return;
    }
    myRole = members.find((m) => m.userId === me)?.role;
    const owner = can(myRole, 'share');
    // A sheet keeps an owner: its only one may neither leave nor step down (the API refuses both).
    const owners = members.filter((m) => m.role === 'owner').length;
    const fixed = (m: Member) => m.role === 'owner' && owners === 1;
    addForm.hidden = !owner;
    dialog.dataset.loaded = 'true';
    list.replaceChildren(
      ...members.map((m) => {
        const label = m.email ?? (m.userId === me && ctx.myEmail ? ctx.myEmail : m.userId);
        const item = el('li', {}, el('span', { className: 'who', title: m.userId }, label));
        item.dataset.userId = m.userId;
        if (m.email) item.dataset.email = m.email;
        item.dataset.role = m.role;
        if (m.userId === me) item.append(el('span', { className: 'meta' }, '(you)'));
        if (owner && !fixed(m)) {
          const s = roleSelect(m.role, `role of ${label}`);
          s.onchange = async () => {
            s.disabled = true;
            try {
              await catalog.setRole(logId, m.userId, s.value as Role);
              messages.info(`${label} is now ${s.value}.`);
            } catch (e) {
              say(e, messages, status);
            }
            await draw();
          };
          item.append(s);
        } else {
          const title = fixed(m) ? 'The only owner: make someone else owner first' : '';
          item.append(el('span', { className: 'role', title }, m.role));
        }
        if ((m.userId === me || owner) && !fixed(m)) {
          const remove = el('button', { type: 'button', className: 'remove' }, m.userId === me ? 'Leave' : 'Remove');
          remove.onclick = async () => {
            remove.disabled = true;
            try {
              await catalog.remove(logId, m.userId);
              if (m.userId === me) {
                messages.info(`You left “${ctx.name}”.`);
                dialog.close();
                ctx.onLeft();
                return;
              }
              messages.info(`${label} no longer has access.`);
            } catch (e) {
              say(e, messages, status);
            }
            await draw();
          };
          item.append(remove);
        }
        return item;
      }),
      ...invitations.map((inv) => invitationItem(inv, owner)),
    );
  }

  /** An invitation: the address, "invited", and for owners its role and a way to withdraw it. */
  function invitationItem(inv: Invitation, owner: boolean): HTMLLIElement {
    const item = el(
      'li',
      { className: 'invited' },
      el('span', { className: 'who' }, inv.email),
      el('span', { className: 'meta' }, '(invited)'),
    );
    item.dataset.email = inv.email;
    item.dataset.role = inv.role;
    item.dataset.invited = 'true';
    if (!owner) {
      item.append(el('span', { className: 'role' }, inv.role));
      return item;
    }
    const s = roleSelect(inv.role, `role of ${inv.email}`);
    s.onchange = async () => {
      s.disabled = true;
      try {
        await catalog.add(logId, inv.email, s.value as Role);
        messages.info(`${inv.email} is invited as ${s.value}.`);
      } catch (e) {
        say(e, messages, status);
      }
      await draw();
    };
    const withdraw = el('button', { type: 'button', className: 'remove' }, 'Withdraw');
    withdraw.onclick = async () => {
      withdraw.disabled = true;
      try {
        await catalog.uninvite(logId, inv.email);
        messages.info(`The invitation to ${inv.email} is withdrawn.`);
      } catch (e) {
        say(e, messages, status);
      }
      await draw();
    };
    item.append(s, withdraw);
    return item;
  }

  addForm.onsubmit = async (ev) => {
    ev.preventDefault();
    const w = who.value.trim();
    if (!w) return;
    add.disabled = true;
    status.textContent = '';
    try {
      const m = await catalog.add(logId, w, newRole.value as Role);
      // By email the API does not say whether the address has an account (docs/api.md,
      // "Sharing by email"): it is an invitation, listed below until the person claims it.
      messages.info(
        m.userId === undefined
          ? `Invited ${m.email ?? w} as ${m.role}. They join when they sign in to this stack with that address and open the sheet or their list; an administrator creates accounts.`
          : `Shared with ${m.email ?? w} as ${m.role}.`,
      );
      who.value = '';
    } catch (e) {
      say(e, messages, status);
    } finally {
      add.disabled = false;
    }
    await draw();
  };

  const closed = new Promise<void>((resolve) => {
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve();
    });
  });
  close.onclick = () => dialog.close();
  dialog.showModal();
  await draw();
  if (!addForm.hidden) who.focus();
  return closed;
}

/**
 * The sign-in pages (cognito mode): email and password, then whatever Cognito asks next: a new
 * password for an invited person's first sign-in, the code of an authenticator app, or setting
 * one up. Each step's form replaces the last in the page's `main`; refusals are said in words in
 * the form. The calls are session.ts's.
 */
import type { Session } from './session';
import { el, words } from './ui';

/** One sign-in under way: where it is shown, who signs in, and what runs once signed in. */
interface SignIn {
  root: HTMLElement;
  session: Session;
  email: string;
  done: () => void;
}

type SignInStep = Awaited<ReturnType<Session['signIn']>>;

/** The sign-in form, in place of what `root` held; `done` runs once signed in. */
export function signInPage(root: HTMLElement, session: Session, done: () => void): void {
  document.title = 'Sign in · sheetlog';
  const email = el('input', {
    type: 'email',
    name: 'email',
    autocomplete: 'username',
    required: true,
    ariaLabel: 'email',
    placeholder: 'you@example.com',
    value: session.email ?? '',
  });
  const password = el('input', {
    type: 'password',
    name: 'password',
    autocomplete: 'current-password',
    required: true,
    ariaLabel: 'password',
  });
  const error = el('p', { className: 'form-error', role: 'alert' });
  const submit = el('button', { type: 'submit', className: 'primary' }, 'Sign in');
  const form = el(
    'form',
    { className: 'sign-in' },
    el('h1', {}, 'Sign in'),
    el('label', {}, 'Email', email),
    el('label', {}, 'Password', password),
    submit,
    error,
  );
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    error.textContent = '';
    try {
      const step = await session.signIn(email.value, password.value);
      nextStep({ root, session, email: email.value, done }, step);
    } catch (e) {
      error.textContent = words(e);
      submit.disabled = false;
      password.select();
    }
  };
  root.replaceChildren(
    el('header', { className: 'toolbar' }, el('a', { href: '/', className: 'home' }, 'sheetlog')),
    el('main', { className: 'list' }, form),
  );
  (email.value ? password : email).focus();
}

/** Shows what a sign-in asks next, or finishes it. */
function nextStep(s: SignIn, r: SignInStep): void {
  switch (r.kind) {
    case 'signed-in':
      s.done();
      return;
    case 'new-password':
      newPasswordForm(s, r.session, r.username);
      return;
    case 'mfa-code':
      mfaCodeForm(s, r.session, r.username);
      return;
    case 'mfa-setup':
      void mfaSetupForm(s, r.session, r.username);
      return;
  }
}

/** A six-digit code field for an authenticator app. */
function codeInput(): HTMLInputElement {
  return el('input', {
    type: 'text',
    inputMode: 'numeric',
    autocomplete: 'one-time-code',
    pattern: '[0-9]{6}',
    maxLength: 6,
    required: true,
    ariaLabel: 'authenticator code',
  });
}

/** A form of one code field that calls `send` with the code and goes on with its answer. */
function codeForm(
  s: SignIn,
  className: string,
  intro: HTMLElement[],
  label: string,
  send: (code: string) => Promise<SignInStep>,
): void {
  const code = codeInput();
  const error = el('p', { className: 'form-error', role: 'alert' });
  const submit = el('button', { type: 'submit', className: 'primary' }, label);
  const form = el(
    'form',
    { className: `sign-in ${className}` },
    ...intro,
    el('label', {}, 'Code', code),
    submit,
    error,
  );
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    error.textContent = '';
    try {
      nextStep(s, await send(code.value));
    } catch (e) {
      error.textContent = words(e);
      code.select();
    } finally {
      submit.disabled = false;
    }
  };
  s.root.querySelector('main')?.replaceChildren(form);
  code.focus();
}

/** SOFTWARE_TOKEN_MFA: the code the person's authenticator app shows. */
function mfaCodeForm(s: SignIn, challenge: string, username: string): void {
  codeForm(
    s,
    'mfa-code',
    [
      el('h1', {}, 'Enter your code'),
      el('p', { className: 'hint' }, 'Open your authenticator app and enter the code it shows for sheetlog.'),
    ],
    'Sign in',
    (code) => s.session.answerMfa(challenge, username, s.email, code),
  );
}

/**
 * MFA_SETUP (`cognitoMfa=required`, first sign-in): the key for a new authenticator app, as text
 * and as an `otpauth://` link (which phone apps open), then the app's first code.
 */
async function mfaSetupForm(s: SignIn, challenge: string, username: string): Promise<void> {
  let started: { secret: string; session: string };
  try {
    started = await s.session.startMfaSetup(challenge);
  } catch (e) {
    s.root.querySelector('main')?.replaceChildren(el('p', { className: 'form-error', role: 'alert' }, words(e)));
    return;
  }
  const uri = `otpauth://totp/${encodeURIComponent(`sheetlog:${s.email}`)}?secret=${started.secret}&issuer=sheetlog`;
  const key = el('code', { className: 'mfa-key' }, started.secret.replace(/(.{4})/g, '$1 ').trim());
  key.dataset.secret = started.secret;
  codeForm(
    s,
    'mfa-setup',
    [
      el('h1', {}, 'Set up your authenticator app'),
      el(
        'p',
        { className: 'hint' },
        'This stack asks for a code from an authenticator app at every sign-in. Add this key to your app (time-based, 6 digits), or open ',
        el('a', { href: uri }, 'this link'),
        ' on your phone:',
      ),
      key,
      el('p', { className: 'hint' }, 'Then enter the code the app shows.'),
    ],
    'Verify and sign in',
    (code) => s.session.finishMfaSetup(started.session, username, s.email, code),
  );
}

/** NEW_PASSWORD_REQUIRED: an invited person's first sign-in replaces the temporary password. */
function newPasswordForm(s: SignIn, challenge: string, username: string): void {
  const pw = el('input', {
    type: 'password',
    autocomplete: 'new-password',
    required: true,
    ariaLabel: 'new password',
  });
  const again = el('input', {
    type: 'password',
    autocomplete: 'new-password',
    required: true,
    ariaLabel: 'repeat new password',
  });
  const error = el('p', { className: 'form-error', role: 'alert' });
  const submit = el('button', { type: 'submit', className: 'primary' }, 'Set password and sign in');
  const form = el(
    'form',
    { className: 'sign-in new-password' },
    el('h1', {}, 'Choose your password'),
    el('p', { className: 'hint' }, `Welcome, ${s.email}. You signed in with a temporary password: choose your own.`),
    el('label', {}, 'New password', pw),
    el('label', {}, 'Repeat it', again),
    submit,
    error,
  );
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    if (pw.value !== again.value) {
      error.textContent = 'The two passwords differ.';
      return;
    }
    submit.disabled = true;
    error.textContent = '';
    try {
      const r = await s.session.completeNewPassword(challenge, username, s.email, pw.value);
      if (r.kind === 'new-password') error.textContent = 'Cognito asked for yet another new password; try again.';
      else nextStep(s, r);
    } catch (e) {
      error.textContent = words(e);
    } finally {
      submit.disabled = false;
    }
  };
  s.root.querySelector('main')?.replaceChildren(form);
  pw.focus();
}
